// Differential check (README.md): for each "req HEX" line, the hex of what protobuf-java parsed,
// re-serialized as net models it (header plus the operation's sub-message, no unknown fields).
import java.io.*;
import com.google.protobuf.*;
import org.apache.bookkeeper.proto.BookkeeperProtocol.*;
public class CanonPj {
  static Message strip(Message m) {
    Message.Builder b = m.toBuilder();
    b.setUnknownFields(UnknownFieldSet.getDefaultInstance());
    for (Descriptors.FieldDescriptor f : m.getAllFields().keySet())
      if (f.getJavaType() == Descriptors.FieldDescriptor.JavaType.MESSAGE && !f.isRepeated())
        b.setField(f, strip((Message) m.getField(f)));
    return b.build();
  }
  public static void main(String[] a) throws Exception {
    BufferedReader r = new BufferedReader(new InputStreamReader(System.in));
    Parser<Request> parser = DiscardUnknownFieldsParser.wrap(Request.parser());
    String line;
    while ((line = r.readLine()) != null) {
      line = line.trim(); if (line.isEmpty()) continue;
      String[] p = line.split("\\s+", 2);
      byte[] b = ProbePj.hex(p.length > 1 ? p[1] : "");
      try {
        Request q = parser.parseFrom(b);
        Request.Builder o = Request.newBuilder().setHeader(q.getHeader());
        switch (q.getHeader().getOperation()) {
          case READ_ENTRY: if (q.hasReadRequest()) o.setReadRequest(q.getReadRequest()); break;
          case ADD_ENTRY: if (q.hasAddRequest()) o.setAddRequest(q.getAddRequest()); break;
          case AUTH: if (q.hasAuthRequest()) o.setAuthRequest(q.getAuthRequest()); break;
          case WRITE_LAC: if (q.hasWriteLacRequest()) o.setWriteLacRequest(q.getWriteLacRequest()); break;
          case READ_LAC: if (q.hasReadLacRequest()) o.setReadLacRequest(q.getReadLacRequest()); break;
          case GET_BOOKIE_INFO: if (q.hasGetBookieInfoRequest()) o.setGetBookieInfoRequest(q.getGetBookieInfoRequest()); break;
          case START_TLS: if (q.hasStartTLSRequest()) o.setStartTLSRequest(q.getStartTLSRequest()); break;
          case FORCE_LEDGER: if (q.hasForceLedgerRequest()) o.setForceLedgerRequest(q.getForceLedgerRequest()); break;
          case GET_LIST_OF_ENTRIES_OF_LEDGER: if (q.hasGetListOfEntriesOfLedgerRequest()) o.setGetListOfEntriesOfLedgerRequest(q.getGetListOfEntriesOfLedgerRequest()); break;
          default: break;
        }
        StringBuilder sb = new StringBuilder("OK ");
        for (byte x : strip(o.build()).toByteArray()) sb.append(String.format("%02x", x));
        System.out.println(sb);
      } catch (Throwable e) { System.out.println("ERR " + e.getClass().getSimpleName()); }
    }
  }
}
