package cowcheck.bridge;

import java.util.Collection;

/** Values as Python writes them (messages that read the same on both sides of the bridge). */
final class Repr {
    private Repr() {}

    static String of(Object o) {
        if (o == null) {
            return "None";
        }
        if (o instanceof Boolean) {
            return (Boolean) o ? "True" : "False";
        }
        if (o instanceof String) {
            String s = (String) o;
            return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'";
        }
        if (o instanceof Collection) {
            StringBuilder b = new StringBuilder("[");
            for (Object x : (Collection<?>) o) {
                if (b.length() > 1) {
                    b.append(", ");
                }
                b.append(of(x));
            }
            return b.append(']').toString();
        }
        return String.valueOf(o);
    }

    /** Equality as Python's: True == 1, and an Integer equals a Long of the same value. */
    static Object identity(Object o) {
        if (o instanceof Integer || o instanceof Long) {
            return ((Number) o).longValue();
        }
        if (o instanceof Boolean) {
            return (Boolean) o ? 1L : 0L;
        }
        return o;
    }
}
