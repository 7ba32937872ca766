package cowcheck.bridge;

import java.util.ConcurrentModificationException;

/** How Java exceptions are named on the Python side (reference/errors.py). */
final class Errors {
    private Errors() {}

    static String pythonName(Throwable t) {
        if (t instanceof ConcurrentModificationException) {
            return "ConcurrentModificationError";
        }
        return t.getClass().getName();
    }
}
