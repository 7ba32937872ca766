package cowcheck.bridge;

/**
 * Operation codes of the batched encoding (properties/flink/batch.py, encode_steps): an operation's
 * position in properties.map.ops.MAP_OPS. Batch operations come first in the table, so a batch
 * ({@link Batch}) and a walk ({@link Walk}) number them alike; {@code write_snapshot} (batch=False)
 * runs in walks only. Tests hold {@link #OPERATIONS} and these constants to the table.
 */
final class Ops {
    private Ops() {}

    static final String[] OPERATIONS = {
        "put", "put_and_get_old", "get", "get_mutate", "contains_key", "remove", "remove_and_get_old", "transform",
        "rehash", "snapshot", "read_snapshot", "read_snapshot_transformed", "release", "iterate", "iterate_modify",
        "keys", "size_of_namespace", "visit", "put_range", "remove_range", "get_range", "hold_keys", "write_snapshot",
    };

    static final int PUT = 0;
    static final int PUT_AND_GET_OLD = 1;
    static final int GET = 2;
    static final int GET_MUTATE = 3;
    static final int CONTAINS_KEY = 4;
    static final int REMOVE = 5;
    static final int REMOVE_AND_GET_OLD = 6;
    static final int TRANSFORM = 7;
    static final int REHASH = 8;
    static final int SNAPSHOT = 9;
    static final int READ_SNAPSHOT = 10;
    static final int READ_SNAPSHOT_TRANSFORMED = 11;
    static final int RELEASE = 12;
    static final int ITERATE = 13;
    static final int ITERATE_MODIFY = 14;
    static final int KEYS = 15;
    static final int SIZE_OF_NAMESPACE = 16;
    static final int VISIT = 17;
    static final int PUT_RANGE = 18;
    static final int REMOVE_RANGE = 19;
    static final int GET_RANGE = 20;
    static final int HOLD_KEYS = 21;
    static final int WRITE_SNAPSHOT = 22;

    /** The last code a batch runs (write_snapshot is a walk's only). */
    static final int LAST_BATCH = HOLD_KEYS;

    /** Whether {@code op} is one of docs/contract.md §4's keyed operations (one rehash step first). */
    static boolean keyed(int op) {
        return op <= TRANSFORM;
    }

    /** A copy of {@link #OPERATIONS} (for Python). */
    static String[] names() {
        return OPERATIONS.clone();
    }
}
