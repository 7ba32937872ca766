package cowcheck.bridge;

import java.util.List;

/**
 * Answers for Python as JSON text (parsed by the C json module, far faster than decoding values
 * one by one in Python): arrays, ints (Integer and Long), strings, booleans, null, and
 * {"raised": name, "message": text} for an exception.
 */
final class Json {
    private static final char[] HEX = "0123456789abcdef".toCharArray();
    private final StringBuilder out;

    Json() {
        this(256);
    }

    Json(int capacity) {
        out = new StringBuilder(capacity);
    }

    private void separate() {
        int n = out.length();
        if (n > 0 && out.charAt(n - 1) != '[') {
            out.append(',');
        }
    }

    Json open() {
        separate();
        out.append('[');
        return this;
    }

    Json close() {
        out.append(']');
        return this;
    }

    Json nil() {
        separate();
        out.append("null");
        return this;
    }

    Json i(long v) {
        separate();
        out.append(v);
        return this;
    }

    Json bool(boolean b) {
        separate();
        out.append(b);
        return this;
    }

    Json str(String s) {
        separate();
        quote(s);
        return this;
    }

    private void quote(String s) {
        out.append('"');
        for (int k = 0; k < s.length(); k++) {
            char c = s.charAt(k);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20 || c >= 0x7f) { // \\uXXXX of the UTF-16 unit, surrogates included
                out.append('\\').append('u').append(HEX[c >>> 12]).append(HEX[(c >>> 8) & 0xf])
                        .append(HEX[(c >>> 4) & 0xf]).append(HEX[c & 0xf]);
            } else {
                out.append(c);
            }
        }
        out.append('"');
    }

    /** {"raised": name, "message": text}: an exception with its message (Walk's answers). */
    Json thrown(Throwable t) {
        separate();
        out.append("{\"raised\":");
        quote(Errors.pythonName(t));
        out.append(",\"message\":");
        quote(t.getMessage() == null ? "" : t.getMessage());
        out.append('}');
        return this;
    }

    Json ints(int[] values) {
        open();
        for (int v : values) {
            i(v);
        }
        return close();
    }

    /**
     * A key, namespace or list element: Integer, Long, String, Boolean or null, and Flink's Tuple2,
     * TimeWindow and VoidNamespace as the tagged objects of counterexample files ({"Tuple2": [f0,
     * f1]}, {"TimeWindow": [start, end]}, {"VoidNamespace": []}; properties/flink/convert.py decodes them).
     */
    Json value(Object o) {
        if (o == null) {
            return nil();
        } else if (o instanceof Integer || o instanceof Long) {
            return i(((Number) o).longValue());
        } else if (o instanceof String) {
            return str((String) o);
        } else if (o instanceof Boolean) {
            return bool((Boolean) o);
        } else if (Keys.isTuple2(o)) {
            tag("Tuple2");
            value(Keys.f0(o)).value(Keys.f1(o));
            return endTag();
        } else if (Keys.isWindow(o)) {
            tag("TimeWindow");
            i(Keys.start(o)).i(Keys.end(o));
            return endTag();
        } else if (Keys.isVoid(o)) {
            tag("VoidNamespace");
            return endTag();
        }
        throw new IllegalArgumentException("cannot encode a " + o.getClass().getName());
    }

    private void tag(String name) {
        separate();
        out.append("{\"").append(name).append("\":[");
    }

    private Json endTag() {
        out.append("]}");
        return this;
    }

    /** A list state's content, or null. */
    Json content(List<?> state) {
        if (state == null) {
            return nil();
        }
        open();
        for (Object x : state) {
            value(x);
        }
        return close();
    }

    /** Values written by another Json, as they are. */
    Json raw(String values) {
        separate();
        out.append(values);
        return this;
    }

    @Override
    public String toString() {
        return out.toString();
    }
}
