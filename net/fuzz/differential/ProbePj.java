// Differential check (README.md): parses each "req|resp|auth HEX" line from stdin with
// protobuf-java, as the BookKeeper 4.17 bookie and client do, and prints OK <text> or ERR <why>.
import java.io.*;
import org.apache.bookkeeper.proto.BookkeeperProtocol;
public class ProbePj {
  public static void main(String[] a) throws Exception {
    BufferedReader r = new BufferedReader(new InputStreamReader(System.in));
    String line;
    while ((line = r.readLine()) != null) {
      line = line.trim(); if (line.isEmpty()) continue;
      String[] p = line.split("\\s+", 2);
      byte[] b = hex(p.length > 1 ? p[1] : "");
      try {
        Object m = p[0].equals("req") ? BookkeeperProtocol.Request.parseFrom(new ByteArrayInputStream(b))
                 : p[0].equals("resp") ? BookkeeperProtocol.Response.parseFrom(new ByteArrayInputStream(b))
                 : BookkeeperProtocol.AuthMessage.parseFrom(new ByteArrayInputStream(b));
        System.out.println("OK " + m.toString().replaceAll("\\s+", " "));
      } catch (Throwable e) { System.out.println("ERR " + e.getClass().getSimpleName() + ": " + e.getMessage()); }
    }
  }
  static byte[] hex(String s) { s = s.replaceAll("\\s", ""); byte[] o = new byte[s.length()/2];
    for (int i = 0; i < o.length; i++) o[i] = (byte) Integer.parseInt(s.substring(2*i, 2*i+2), 16); return o; }
}
