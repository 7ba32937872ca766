package cowcheck.bridge;

import java.util.Arrays;

/** A growable int array (fixed-layout white-box answers). */
final class Ints {
    private int[] data = new int[1024];
    private int length;

    Ints add(int v) {
        if (length == data.length) {
            data = Arrays.copyOf(data, data.length * 2);
        }
        data[length++] = v;
        return this;
    }

    int[] toArray() {
        return Arrays.copyOf(data, length);
    }
}
