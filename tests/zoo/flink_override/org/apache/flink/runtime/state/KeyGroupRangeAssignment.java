package org.apache.flink.runtime.state;

/**
 * cowcheck's own stand-in for Flink's KeyGroupRangeAssignment, for the --classpath test
 * (tests/test_flink_classpath.py): the same public methods, written here, with one change a patch
 * could make by mistake -- a key's group is its hashCode modulo the max parallelism, without the
 * murmur hash Flink spreads it with. Put before flink-dist on the class path, every Flink class
 * that assigns key groups (CopyOnWriteStateTable among them) uses it; the table machine's
 * checkpoint writes then hold keys in other key groups than the contract's (T2).
 */
public final class KeyGroupRangeAssignment {
    public static final int DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 1 << 7;
    public static final int UPPER_BOUND_MAX_PARALLELISM = 1 << 15;

    private KeyGroupRangeAssignment() {}

    public static int assignKeyToParallelOperator(Object key, int maxParallelism, int parallelism) {
        return computeOperatorIndexForKeyGroup(maxParallelism, parallelism, assignToKeyGroup(key, maxParallelism));
    }

    public static int assignToKeyGroup(Object key, int maxParallelism) {
        if (key == null) {
            throw new NullPointerException("a key must not be null");
        }
        return computeKeyGroupForKeyHash(key.hashCode(), maxParallelism);
    }

    /** The change: the hash is used as it is, not spread first. */
    public static int computeKeyGroupForKeyHash(int keyHash, int maxParallelism) {
        return Math.floorMod(keyHash, maxParallelism);
    }

    public static KeyGroupRange computeKeyGroupRangeForOperatorIndex(int maxParallelism, int parallelism,
                                                                     int operatorIndex) {
        checkParallelismPreconditions(parallelism);
        int first = (operatorIndex * maxParallelism + parallelism - 1) / parallelism;
        int last = ((operatorIndex + 1) * maxParallelism - 1) / parallelism;
        return KeyGroupRange.of(first, last);
    }

    public static int computeOperatorIndexForKeyGroup(int maxParallelism, int parallelism, int keyGroup) {
        return keyGroup * parallelism / maxParallelism;
    }

    public static int computeDefaultMaxParallelism(int operatorParallelism) {
        int wanted = Integer.highestOneBit(Math.max(1, operatorParallelism + operatorParallelism / 2) * 2 - 1);
        return Math.min(Math.max(wanted, DEFAULT_LOWER_BOUND_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM);
    }

    public static void checkParallelismPreconditions(int parallelism) {
        if (parallelism <= 0 || parallelism > UPPER_BOUND_MAX_PARALLELISM) {
            throw new IllegalArgumentException("parallelism must be in [1, " + UPPER_BOUND_MAX_PARALLELISM + "], got "
                    + parallelism);
        }
    }
}
