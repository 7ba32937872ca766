package cowcheck.bridge;

/** A white-box answer for Python: fixed-layout ints, and the keys they refer to as JSON. */
public final class Encoded {
    public final int[] data;
    public final String keys;

    Encoded(int[] data, String keys) {
        this.data = data;
        this.keys = keys;
    }
}
