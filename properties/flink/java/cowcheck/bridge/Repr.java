package cowcheck.bridge;

import java.util.Collection;

/**
 * Values as Python's {@code repr} writes them, so messages read the same on both sides of the bridge
 * (a batched walk's failure and the call-by-call bridge's must be equal, message included): strings
 * with Python's quotes and escapes (lone surrogates as {@code '\ud800'}), {@code Tuple2(1, 'a')},
 * {@code TimeWindow(0, 10)}, {@code VOID_NAMESPACE} (properties/core/keys.py's types).
 */
public final class Repr {
    private Repr() {}

    static String of(Object o) {
        if (o == null) {
            return "None";
        }
        if (o instanceof Boolean) {
            return (Boolean) o ? "True" : "False";
        }
        if (o instanceof String) {
            return string((String) o);
        }
        if (Keys.isTuple2(o)) {
            return "Tuple2(" + of(Keys.f0(o)) + ", " + of(Keys.f1(o)) + ")";
        }
        if (Keys.isWindow(o)) {
            return "TimeWindow(" + Keys.start(o) + ", " + Keys.end(o) + ")";
        }
        if (Keys.isVoid(o)) {
            return "VOID_NAMESPACE";
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

    /** CPython's unicode_repr: code points (a surrogate pair is one, a lone surrogate itself). */
    static String string(String s) {
        boolean single = s.indexOf('\'') >= 0;
        boolean dbl = s.indexOf('"') >= 0;
        char quote = single && !dbl ? '"' : '\'';
        StringBuilder b = new StringBuilder(s.length() + 2).append(quote);
        for (int k = 0; k < s.length(); ) {
            int c = s.codePointAt(k);
            k += Character.charCount(c);
            if (c == quote || c == '\\') {
                b.append('\\').append((char) c);
            } else if (c == '\t') {
                b.append("\\t");
            } else if (c == '\n') {
                b.append("\\n");
            } else if (c == '\r') {
                b.append("\\r");
            } else if (c < ' ' || c == 0x7f) {
                hex(b, "\\x", c, 2);
            } else if (c < 0x7f || printable(c)) {
                b.appendCodePoint(c);
            } else if (c <= 0xff) {
                hex(b, "\\x", c, 2);
            } else if (c <= 0xffff) {
                hex(b, "\\u", c, 4);
            } else {
                hex(b, "\\U", c, 8);
            }
        }
        return b.append(quote).toString();
    }

    /** Python's str.isprintable for one non-ASCII code point: not in Cc, Cf, Cs, Co, Cn, Zl, Zp, Zs. */
    private static boolean printable(int c) {
        switch (Character.getType(c)) {
            case Character.CONTROL:
            case Character.FORMAT:
            case Character.SURROGATE:
            case Character.PRIVATE_USE:
            case Character.UNASSIGNED:
            case Character.LINE_SEPARATOR:
            case Character.PARAGRAPH_SEPARATOR:
            case Character.SPACE_SEPARATOR:
                return false;
            default:
                return true;
        }
    }

    private static void hex(StringBuilder b, String prefix, int c, int digits) {
        String h = Integer.toHexString(c);
        b.append(prefix);
        for (int i = h.length(); i < digits; i++) {
            b.append('0');
        }
        b.append(h);
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

    /** The repr of each value (a test compares them with Python's). */
    public static String[] reprs(Object[] values) {
        String[] out = new String[values.length];
        for (int i = 0; i < values.length; i++) {
            out[i] = of(values[i]);
        }
        return out;
    }
}
