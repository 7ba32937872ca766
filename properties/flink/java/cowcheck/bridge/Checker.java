package cowcheck.bridge;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.flink.util.MathUtils;

/**
 * The structural invariants I1–I9 of docs/contract.md §8 and the white-box scenarios of docs/contract.md §13, computed
 * over Flink's own object graph (read by reflection, {@link Internals}), so a white-box walk on
 * Flink pays no Python round trip per entry.
 *
 * <p>The Python checks ({@code reference/invariants.py}: {@code check_structure}, {@code
 * SnapshotGuard}; {@code properties/map/harness.py}: the rehash-advance check; {@code
 * properties/map/scenarios.py}) stay the definition. This class reports the same violations in
 * the same order (the harness fails on the first one), and a test runs both on the same states,
 * seeded corruptions of the real map included ({@code tests/test_flink_walk.py}).
 */
final class Checker {
    private static final int CHAIN_LIMIT = 1 << 22;
    private static final int MIN_TRANSFERRED = 4; // MIN_TRANSFERRED_PER_INCREMENTAL_REHASH
    private static final int MAXIMUM_CAPACITY = 1 << 30;
    private static final int NEVER_GROW_THRESHOLD = Integer.MAX_VALUE - 8;

    /** What a live snapshot saw of one entry when it was taken (SnapshotGuard.record). */
    private static final class Saved {
        final Object entry;
        final Object key;
        final Object namespace;
        final int hash;
        final Object next;
        final Object state;
        final int entryVersion;
        final int stateVersion;
        final List<Object> content;

        Saved(Object e) {
            entry = e;
            key = Internals.key(e);
            namespace = Internals.namespace(e);
            hash = Internals.hash(e);
            next = Internals.next(e);
            state = Internals.state(e);
            entryVersion = Internals.entryVersion(e);
            stateVersion = Internals.stateVersion(e);
            content = state == null ? null : new ArrayList<>((List<?>) state);
        }
    }

    private final TreeMap<Integer, List<Saved>> guarded = new TreeMap<>();

    // -------------------------------------------------------------- SnapshotGuard

    /** Right after a snapshot is taken: every entry it can reach, with a copy of its state. */
    void record(Object snapshot) {
        List<Saved> saved = new ArrayList<>();
        for (Object head : Internals.snapshotData(snapshot)) {
            int n = 0;
            for (Object e = head; e != null && n < CHAIN_LIMIT; e = Internals.next(e), n++) {
                saved.add(new Saved(e));
            }
        }
        guarded.put(Internals.snapshotVersion(snapshot), saved);
    }

    void forget(int version) {
        guarded.remove(version);
    }

    private void guard(List<String[]> out) {
        for (Map.Entry<Integer, List<Saved>> record : guarded.entrySet()) {
            for (Saved s : record.getValue()) {
                Object e = s.entry;
                Object key = Internals.key(e);
                Object namespace = Internals.namespace(e);
                Object next = Internals.next(e);
                Object state = Internals.state(e);
                int ev = Internals.entryVersion(e);
                int sv = Internals.stateVersion(e);
                boolean sameIdentity = Objects.equals(key, s.key) && Objects.equals(namespace, s.namespace)
                        && Internals.hash(e) == s.hash;
                if (!sameIdentity || next != s.next || state != s.state || ev != s.entryVersion
                        || sv != s.stateVersion) {
                    List<String> changed = new ArrayList<>();
                    if (next != s.next) {
                        changed.add("next");
                    }
                    if (state != s.state) {
                        changed.add("state " + Repr.of(s.state) + " -> " + Repr.of(state));
                    }
                    if (ev != s.entryVersion) {
                        changed.add("entry_version " + s.entryVersion + " -> " + ev);
                    }
                    if (sv != s.stateVersion) {
                        changed.add("state_version " + s.stateVersion + " -> " + sv);
                    }
                    if (!sameIdentity) {
                        changed.add("key/namespace/hash");
                    }
                    out.add(new String[] {"I9", snapshotWhere(record.getKey(), s)
                            + ": shared entry was written in place (" + String.join(", ", changed) + ")"});
                }
                if (!Objects.equals(state, s.content)) {
                    out.add(new String[] {"I8", snapshotWhere(record.getKey(), s) + ": state changed from "
                            + Repr.of(s.content) + " to " + Repr.of(state)});
                }
            }
        }
    }

    /** Where a guarded entry is, in a message (built only for a violation: Repr is not free). */
    private static String snapshotWhere(int version, Saved s) {
        return "snapshot " + version + ", entry (" + Repr.of(s.key) + ", " + Repr.of(s.namespace) + ")";
    }

    private static String where(Object key, Object namespace, String table, int idx) {
        return "(" + Repr.of(key) + ", " + Repr.of(namespace) + ") in " + table + "[" + idx + "]";
    }

    // ----------------------------------------------------------- check_structure

    static int thresholdFor(int capacity) {
        return capacity == MAXIMUM_CAPACITY ? NEVER_GROW_THRESHOLD : capacity * 3 / 4;
    }

    private static boolean powerOfTwo(int n) {
        return n > 0 && (n & (n - 1)) == 0;
    }

    static int compositeHash(Object key, Object namespace, int otherwise) {
        if (key == null || namespace == null) {
            return otherwise;
        }
        return MathUtils.bitMix(key.hashCode() ^ namespace.hashCode());
    }

    /** I1–I7 (check_structure), then I8/I9 (SnapshotGuard), as [code, message] pairs in order. */
    List<String[]> violations(Object map, Collection<Integer> liveVersions) {
        List<String[]> out = new ArrayList<>();
        structure(map, liveVersions, out);
        guard(out);
        return out;
    }

    private static void structure(Object map, Collection<Integer> liveVersions, List<String[]> out) {
        int[] s = Internals.summary(map);
        Object[] primary = Internals.primaryTable(map);
        Object[] rehash = Internals.rehashTable(map);
        boolean rehashing = Internals.isRehashing(map);
        int plen = primary.length;
        int primarySize = s[2];
        int rehashSize = s[3];
        int ri = s[4];
        int threshold = s[5];
        int version = s[7];
        int required = s[8];

        // I7
        if (!powerOfTwo(plen) || plen < 4) {
            out.add(new String[] {"I7", "primary table length " + plen + " is not a power of two >= 4"});
        }
        int expectedThreshold;
        if (rehashing) {
            if (rehash.length != 2 * plen) {
                out.add(new String[] {"I7", "rehash table length " + rehash.length + " != 2 x primary " + plen});
            }
            expectedThreshold = thresholdFor(rehash.length);
        } else {
            expectedThreshold = thresholdFor(plen);
        }
        if (threshold != expectedThreshold) {
            out.add(new String[] {"I7", "threshold " + threshold + " != " + expectedThreshold
                    + " for the current capacity"});
        }

        // I4
        if (rehashing) {
            if (ri < 0 || ri >= plen) {
                out.add(new String[] {"I4", "rehash_index " + ri + " outside [0, " + plen + ")"});
            }
            for (int i = 0; i < Math.min(ri, plen); i++) {
                if (primary[i] != null) {
                    out.add(new String[] {"I4", "primary bucket " + i + " < rehash_index " + ri + " still holds "
                            + Repr.of(Internals.key(primary[i]))});
                }
            }
        } else if (ri != 0) {
            out.add(new String[] {"I4", "rehash_index " + ri + " != 0 while not rehashing"});
        }

        // I1, I2, I3, I6
        Map<List<Object>, Long> seen = new HashMap<>();
        for (int t = 0; t < (rehashing ? 2 : 1); t++) {
            String name = t == 0 ? "primary" : "rehash";
            Object[] table = t == 0 ? primary : rehash;
            int count = 0;
            int tlen = table.length;
            for (int idx = 0; idx < tlen; idx++) {
                List<Object> entries = new ArrayList<>();
                boolean cycle = false;
                for (Object e = table[idx]; e != null; e = Internals.next(e)) {
                    entries.add(e);
                    if (entries.size() > CHAIN_LIMIT) {
                        cycle = true;
                        break;
                    }
                }
                if (cycle) {
                    out.add(new String[] {"I1", name + "[" + idx + "]: chain does not end (cycle)"});
                    continue;
                }
                for (Object e : entries) {
                    count++;
                    Object key = Internals.key(e);
                    Object namespace = Internals.namespace(e);
                    int hash = Internals.hash(e);
                    int h = compositeHash(key, namespace, hash);
                    if (hash != h) {
                        out.add(new String[] {"I1", where(key, namespace, name, idx) + ": stored hash " + hash
                                + " != composite hash " + h});
                    }
                    if ((hash & (tlen - 1)) != idx) {
                        out.add(new String[] {"I1", where(key, namespace, name, idx) + ": hash selects bucket "
                                + (hash & (tlen - 1))});
                    }
                    boolean inPrimary = !rehashing || (hash & (plen - 1)) >= ri;
                    if (inPrimary != (t == 0)) {
                        out.add(new String[] {"I1", where(key, namespace, name, idx)
                                + ": select_active_table picks the " + (inPrimary ? "primary" : "rehash") + " table"});
                    }
                    List<Object> ident = List.of(Repr.identity(key), Repr.identity(namespace));
                    Long before = seen.get(ident); // where it was seen first: table << 32 | bucket
                    if (before != null) {
                        String first = (before >>> 32 == 0 ? "primary" : "rehash") + "[" + (int) (long) before + "]";
                        out.add(new String[] {"I3", "(" + Repr.of(key) + ", " + Repr.of(namespace) + ") appears in "
                                + first + " and " + name + "[" + idx + "]"});
                    } else {
                        seen.put(ident, ((long) t << 32) | idx);
                    }
                    int ev = Internals.entryVersion(e);
                    int sv = Internals.stateVersion(e);
                    if (ev > version || sv > version) {
                        out.add(new String[] {"I6", where(key, namespace, name, idx) + ": entry_version " + ev
                                + " / state_version " + sv + " > V=" + version});
                    }
                }
            }
            int size = t == 0 ? primarySize : rehashSize;
            if (size != count) {
                out.add(new String[] {"I2", name + "_table_size " + size + " != " + count + " reachable entries"});
            }
        }
        if (!rehashing && rehashSize != 0) {
            out.add(new String[] {"I2", "incremental_rehash_table_size " + rehashSize + " != 0 while not rehashing"});
        }

        // I5
        List<Integer> registered = new ArrayList<>(new TreeSet<>(Internals.snapshotVersions(map)));
        int expectedR = registered.isEmpty() ? 0 : registered.get(registered.size() - 1);
        if (required != expectedR) {
            out.add(new String[] {"I5", "highest_required_snapshot_version " + required + " != max"
                    + Repr.of(registered) + " or 0"});
        }
        for (int v : registered) {
            if (v > version || v <= 0) {
                out.add(new String[] {"I5", "snapshot versions " + Repr.of(registered) + " not in [1, V=" + version
                        + "]"});
                break;
            }
        }
        if (liveVersions != null) {
            List<Integer> live = new ArrayList<>(liveVersions);
            live.sort(null);
            if (!live.equals(registered)) {
                out.add(new String[] {"I5", "map registers snapshot versions " + Repr.of(registered)
                        + ", live snapshots are " + Repr.of(live)});
            }
        }
    }

    // ----------------------------------------------------------------- scenarios

    private static List<Object> chain(Object head) {
        List<Object> out = new ArrayList<>();
        for (Object e = head; e != null && out.size() <= CHAIN_LIMIT; e = Internals.next(e)) {
            out.add(e);
        }
        return out;
    }

    /** scenarios._predict: [key, namespace, entryVersion, stateVersion] rows, copied, finished. */
    private static Object[] predict(Object map, int h) {
        int[] s = Internals.summary(map);
        Object[] primary = Internals.primaryTable(map);
        int plen = primary.length;
        int required = s[8];
        int version = s[7];
        List<Object[]> rows = new ArrayList<>();
        if (!Internals.isRehashing(map)) {
            for (Object e : chain(primary[h & (plen - 1)])) {
                rows.add(row(e, Internals.entryVersion(e)));
            }
            return new Object[] {rows, false, false};
        }
        Object[] rehash = Internals.rehashTable(map);
        int newMask = rehash.length - 1;
        List<Object> moved = new ArrayList<>();
        int i = s[4];
        boolean finished = false;
        while (moved.size() < MIN_TRANSFERRED) {
            moved.addAll(chain(primary[i]));
            i++;
            if (i == plen) {
                finished = true;
                break;
            }
        }
        boolean copied = false;
        for (Object e : moved) {
            copied |= Internals.entryVersion(e) < required;
        }
        if (!finished && (h & (plen - 1)) >= i) {
            for (Object e : chain(primary[h & (plen - 1)])) {
                rows.add(row(e, Internals.entryVersion(e)));
            }
            return new Object[] {rows, copied, finished};
        }
        int idx = h & newMask;
        for (int k = moved.size() - 1; k >= 0; k--) {
            Object e = moved.get(k);
            if ((Internals.hash(e) & newMask) == idx) {
                int ev = Internals.entryVersion(e);
                rows.add(row(e, ev < required ? version : ev));
            }
        }
        for (Object e : chain(rehash[idx])) {
            rows.add(row(e, Internals.entryVersion(e)));
        }
        return new Object[] {rows, copied, finished};
    }

    private static Object[] row(Object e, int entryVersion) {
        return new Object[] {Internals.key(e), Internals.namespace(e), entryVersion, Internals.stateVersion(e)};
    }

    /** scenarios.classify_keyed: the scenarios keyed operation {@code op} on (key, namespace) will hit. */
    @SuppressWarnings("unchecked")
    static List<String> classifyKeyed(Object map, String op, Object key, Object namespace) {
        int h = compositeHash(key, namespace, 0);
        Object[] p = predict(map, h);
        List<Object[]> chain = (List<Object[]>) p[0];
        boolean copied = (Boolean) p[1];
        boolean finished = (Boolean) p[2];
        int required = Internals.summary(map)[8];
        List<String> out = new ArrayList<>();
        if (copied) {
            out.add("rehash-step-copies");
        }
        if (finished && required > 0) {
            out.add("rehash-finish-under-snapshot");
        }
        int pos = -1;
        for (int i = 0; i < chain.size(); i++) {
            if (Objects.equals(chain.get(i)[0], key) && Objects.equals(chain.get(i)[1], namespace)) {
                pos = i;
                break;
            }
        }
        String where = pos < 0 ? null : pos == 0 ? "head" : pos == chain.size() - 1 ? "tail" : "middle";
        switch (op) {
            case "put":
            case "put_and_get_old":
            case "transform":
                if (pos < 0) {
                    out.add(chain.isEmpty() ? "put-empty-bucket" : "put-chain-head");
                } else {
                    out.add("update-" + where + "-" + (required != 0 ? "snap" : "nosnap"));
                }
                break;
            case "get":
            case "get_mutate":
                if (pos >= 0) {
                    int ev = (Integer) chain.get(pos)[2];
                    int sv = (Integer) chain.get(pos)[3];
                    if (sv < required) {
                        boolean prefixOld = false;
                        for (int i = 0; i < pos; i++) {
                            prefixOld |= (Integer) chain.get(i)[2] < required;
                        }
                        if (ev < required && pos > 0 && prefixOld) {
                            out.add("get-middle-copies-prefix");
                        }
                        if (ev >= required) {
                            out.add("get-copied-entry-old-state");
                        }
                    }
                }
                break;
            case "remove":
            case "remove_and_get_old":
                if (pos >= 0) {
                    out.add("remove-" + where);
                    if (pos > 0 && required != 0) {
                        out.add((Integer) chain.get(pos - 1)[2] < required ? "remove-prev-old" : "remove-prev-new");
                    }
                }
                break;
            default:
                break;
        }
        return out;
    }

    /** scenarios.classify_snapshot: the scenarios of a snapshot about to be taken. */
    static List<String> classifySnapshot(Object map) {
        List<String> out = new ArrayList<>();
        if (!Internals.isRehashing(map)) {
            out.add("snapshot-not-rehashing");
            return out;
        }
        Object[] primary = Internals.primaryTable(map);
        Object[] rehash = Internals.rehashTable(map);
        int ri = Internals.summary(map)[4];
        int plen = primary.length;
        if (any(primary, ri, plen) && any(rehash, 0, ri) && any(rehash, plen, plen + ri)) {
            out.add("snapshot-rehashing-all-regions");
        }
        return out;
    }

    private static boolean any(Object[] table, int from, int to) {
        for (int i = Math.max(from, 0); i < Math.min(to, table.length); i++) {
            if (table[i] != null) {
                return true;
            }
        }
        return false;
    }
}
