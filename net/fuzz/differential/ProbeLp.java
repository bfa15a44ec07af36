// Differential check (README.md): parses each "req|resp|auth HEX" line from stdin with the
// LightProto classes of BookKeeper 4.18 (parseFrom + materialize, as its bookie does).
import java.io.*;
import io.netty.buffer.*;
import org.apache.bookkeeper.proto.*;
public class ProbeLp {
  public static void main(String[] a) throws Exception {
    BufferedReader r = new BufferedReader(new InputStreamReader(System.in));
    String line;
    while ((line = r.readLine()) != null) {
      line = line.trim(); if (line.isEmpty()) continue;
      String[] p = line.split("\\s+", 2);
      byte[] b = ProbeLpHex.hex(p.length > 1 ? p[1] : "");
      ByteBuf buf = Unpooled.wrappedBuffer(b);
      try {
        Object m;
        if (p[0].equals("req")) { Request q = new Request(); q.parseFrom(buf, buf.readableBytes()); q.materialize(); m = q; }
        else if (p[0].equals("resp")) { Response q = new Response(); q.parseFrom(buf, buf.readableBytes()); q.materialize(); m = q; }
        else { AuthMessage q = new AuthMessage(); q.parseFrom(buf, buf.readableBytes()); q.materialize(); m = q; }
        System.out.println("OK " + m.toString().replaceAll("\\s+", " "));
      } catch (Throwable e) { System.out.println("ERR " + e.getClass().getSimpleName() + ": " + e.getMessage()); }
    }
  }
}
class ProbeLpHex { static byte[] hex(String s) { s = s.replaceAll("\\s", ""); byte[] o = new byte[s.length()/2];
    for (int i = 0; i < o.length; i++) o[i] = (byte) Integer.parseInt(s.substring(2*i, 2*i+2), 16); return o; } }
