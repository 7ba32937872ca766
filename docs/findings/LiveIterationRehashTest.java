package org.apache.flink.runtime.state.heap;

import static org.junit.jupiter.api.Assertions.*;
import java.util.ArrayList;
import java.util.ConcurrentModificationException;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.runtime.state.StateEntry;
import org.apache.flink.runtime.state.VoidNamespace;
import org.junit.jupiter.api.Test;

/**
 * Replays cowcheck's counterexample live-iteration-rehash.json (map machine) on Flink's own classes,
 * written for flink (Apache Flink 2.3.0): it fails where the bug is (divergence P7 at step 98) and passes where it is fixed.
 * Self-contained: Flink's jars and JUnit 5 are all it needs on the class path.
 */
class LiveIterationRehashTest {
    @Test
    void replay() throws Exception {
        // Flink's CopyOnWriteStateMap (capacity 128), states List<Integer> copied by ListSerializer
        CopyOnWriteStateMap<Object, Object, List<Integer>> m =
                new CopyOnWriteStateMap<>(new ListSerializer<>(IntSerializer.INSTANCE));
        Map<Integer, CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>>> snapshots = new HashMap<>();
        List<Integer> v;

        // step 0: m.put(0, 0, [])
        m.put(0, 0, new ArrayList<>(List.of()));

        // step 1: m.put(1, 0, [])
        m.put(1, 0, new ArrayList<>(List.of()));

        // step 2: m.put(2, 0, [])
        m.put(2, 0, new ArrayList<>(List.of()));

        // step 3: m.put(3, 0, [])
        m.put(3, 0, new ArrayList<>(List.of()));

        // step 4: m.put(4, 0, [])
        m.put(4, 0, new ArrayList<>(List.of()));

        // step 5: m.put(5, 0, [])
        m.put(5, 0, new ArrayList<>(List.of()));

        // step 6: m.put(6, 0, [])
        m.put(6, 0, new ArrayList<>(List.of()));

        // step 7: m.put(7, 0, [])
        m.put(7, 0, new ArrayList<>(List.of()));

        // step 8: m.put(8, 0, [])
        m.put(8, 0, new ArrayList<>(List.of()));

        // step 9: m.put(9, 0, [])
        m.put(9, 0, new ArrayList<>(List.of()));

        // step 10: m.put(10, 0, [])
        m.put(10, 0, new ArrayList<>(List.of()));

        // step 11: m.put(11, 0, [])
        m.put(11, 0, new ArrayList<>(List.of()));

        // step 12: m.put(12, 0, [])
        m.put(12, 0, new ArrayList<>(List.of()));

        // step 13: m.put(13, 0, [])
        m.put(13, 0, new ArrayList<>(List.of()));

        // step 14: m.put(14, 0, [])
        m.put(14, 0, new ArrayList<>(List.of()));

        // step 15: m.put(15, 0, [])
        m.put(15, 0, new ArrayList<>(List.of()));

        // step 16: m.put(16, 0, [])
        m.put(16, 0, new ArrayList<>(List.of()));

        // step 17: m.put(17, 0, [])
        m.put(17, 0, new ArrayList<>(List.of()));

        // step 18: m.put(18, 0, [])
        m.put(18, 0, new ArrayList<>(List.of()));

        // step 19: m.put(19, 0, [])
        m.put(19, 0, new ArrayList<>(List.of()));

        // step 20: m.put(20, 0, [])
        m.put(20, 0, new ArrayList<>(List.of()));

        // step 21: m.put(21, 0, [])
        m.put(21, 0, new ArrayList<>(List.of()));

        // step 22: m.put(22, 0, [])
        m.put(22, 0, new ArrayList<>(List.of()));

        // step 23: m.put(23, 0, [])
        m.put(23, 0, new ArrayList<>(List.of()));

        // step 24: m.put(24, 0, [])
        m.put(24, 0, new ArrayList<>(List.of()));

        // step 25: m.put(25, 0, [])
        m.put(25, 0, new ArrayList<>(List.of()));

        // step 26: m.put(26, 0, [])
        m.put(26, 0, new ArrayList<>(List.of()));

        // step 27: m.put(27, 0, [])
        m.put(27, 0, new ArrayList<>(List.of()));

        // step 28: m.put(28, 0, [])
        m.put(28, 0, new ArrayList<>(List.of()));

        // step 29: m.put(29, 0, [])
        m.put(29, 0, new ArrayList<>(List.of()));

        // step 30: m.put(30, 0, [])
        m.put(30, 0, new ArrayList<>(List.of()));

        // step 31: m.put(31, 0, [])
        m.put(31, 0, new ArrayList<>(List.of()));

        // step 32: m.put(32, 0, [])
        m.put(32, 0, new ArrayList<>(List.of()));

        // step 33: m.put(33, 0, [])
        m.put(33, 0, new ArrayList<>(List.of()));

        // step 34: m.put(34, 0, [])
        m.put(34, 0, new ArrayList<>(List.of()));

        // step 35: m.put(35, 0, [])
        m.put(35, 0, new ArrayList<>(List.of()));

        // step 36: m.put(36, 0, [])
        m.put(36, 0, new ArrayList<>(List.of()));

        // step 37: m.put(37, 0, [])
        m.put(37, 0, new ArrayList<>(List.of()));

        // step 38: m.put(38, 0, [])
        m.put(38, 0, new ArrayList<>(List.of()));

        // step 39: m.put(39, 0, [])
        m.put(39, 0, new ArrayList<>(List.of()));

        // step 40: m.put(40, 0, [])
        m.put(40, 0, new ArrayList<>(List.of()));

        // step 41: m.put(41, 0, [])
        m.put(41, 0, new ArrayList<>(List.of()));

        // step 42: m.put(42, 0, [])
        m.put(42, 0, new ArrayList<>(List.of()));

        // step 43: m.put(43, 0, [])
        m.put(43, 0, new ArrayList<>(List.of()));

        // step 44: m.put(44, 0, [])
        m.put(44, 0, new ArrayList<>(List.of()));

        // step 45: m.put(45, 0, [])
        m.put(45, 0, new ArrayList<>(List.of()));

        // step 46: m.put(46, 0, [])
        m.put(46, 0, new ArrayList<>(List.of()));

        // step 47: m.put(47, 0, [])
        m.put(47, 0, new ArrayList<>(List.of()));

        // step 48: m.put(48, 0, [])
        m.put(48, 0, new ArrayList<>(List.of()));

        // step 49: m.put(49, 0, [])
        m.put(49, 0, new ArrayList<>(List.of()));

        // step 50: m.put(50, 0, [])
        m.put(50, 0, new ArrayList<>(List.of()));

        // step 51: m.put(51, 0, [])
        m.put(51, 0, new ArrayList<>(List.of()));

        // step 52: m.put(52, 0, [])
        m.put(52, 0, new ArrayList<>(List.of()));

        // step 53: m.put(53, 0, [])
        m.put(53, 0, new ArrayList<>(List.of()));

        // step 54: m.put(54, 0, [])
        m.put(54, 0, new ArrayList<>(List.of()));

        // step 55: m.put(55, 0, [])
        m.put(55, 0, new ArrayList<>(List.of()));

        // step 56: m.put(56, 0, [])
        m.put(56, 0, new ArrayList<>(List.of()));

        // step 57: m.put(57, 0, [])
        m.put(57, 0, new ArrayList<>(List.of()));

        // step 58: m.put(58, 0, [])
        m.put(58, 0, new ArrayList<>(List.of()));

        // step 59: m.put(59, 0, [])
        m.put(59, 0, new ArrayList<>(List.of()));

        // step 60: m.put(60, 0, [])
        m.put(60, 0, new ArrayList<>(List.of()));

        // step 61: m.put(61, 0, [])
        m.put(61, 0, new ArrayList<>(List.of()));

        // step 62: m.put(62, 0, [])
        m.put(62, 0, new ArrayList<>(List.of()));

        // step 63: m.put(63, 0, [])
        m.put(63, 0, new ArrayList<>(List.of()));

        // step 64: m.put(64, 0, [])
        m.put(64, 0, new ArrayList<>(List.of()));

        // step 65: m.put(65, 0, [])
        m.put(65, 0, new ArrayList<>(List.of()));

        // step 66: m.put(66, 0, [])
        m.put(66, 0, new ArrayList<>(List.of()));

        // step 67: m.put(67, 0, [])
        m.put(67, 0, new ArrayList<>(List.of()));

        // step 68: m.put(68, 0, [])
        m.put(68, 0, new ArrayList<>(List.of()));

        // step 69: m.put(69, 0, [])
        m.put(69, 0, new ArrayList<>(List.of()));

        // step 70: m.put(70, 0, [])
        m.put(70, 0, new ArrayList<>(List.of()));

        // step 71: m.put(71, 0, [])
        m.put(71, 0, new ArrayList<>(List.of()));

        // step 72: m.put(72, 0, [])
        m.put(72, 0, new ArrayList<>(List.of()));

        // step 73: m.put(73, 0, [])
        m.put(73, 0, new ArrayList<>(List.of()));

        // step 74: m.put(74, 0, [])
        m.put(74, 0, new ArrayList<>(List.of()));

        // step 75: m.put(75, 0, [])
        m.put(75, 0, new ArrayList<>(List.of()));

        // step 76: m.put(76, 0, [])
        m.put(76, 0, new ArrayList<>(List.of()));

        // step 77: m.put(77, 0, [])
        m.put(77, 0, new ArrayList<>(List.of()));

        // step 78: m.put(78, 0, [])
        m.put(78, 0, new ArrayList<>(List.of()));

        // step 79: m.put(79, 0, [])
        m.put(79, 0, new ArrayList<>(List.of()));

        // step 80: m.put(80, 0, [])
        m.put(80, 0, new ArrayList<>(List.of()));

        // step 81: m.put(81, 0, [])
        m.put(81, 0, new ArrayList<>(List.of()));

        // step 82: m.put(82, 0, [])
        m.put(82, 0, new ArrayList<>(List.of()));

        // step 83: m.put(83, 0, [])
        m.put(83, 0, new ArrayList<>(List.of()));

        // step 84: m.put(84, 0, [])
        m.put(84, 0, new ArrayList<>(List.of()));

        // step 85: m.put(85, 0, [])
        m.put(85, 0, new ArrayList<>(List.of()));

        // step 86: m.put(86, 0, [])
        m.put(86, 0, new ArrayList<>(List.of()));

        // step 87: m.put(87, 0, [])
        m.put(87, 0, new ArrayList<>(List.of()));

        // step 88: m.put(88, 0, [])
        m.put(88, 0, new ArrayList<>(List.of()));

        // step 89: m.put(89, 0, [])
        m.put(89, 0, new ArrayList<>(List.of()));

        // step 90: m.put(90, 0, [])
        m.put(90, 0, new ArrayList<>(List.of()));

        // step 91: m.put(91, 0, [])
        m.put(91, 0, new ArrayList<>(List.of()));

        // step 92: m.put(92, 0, [])
        m.put(92, 0, new ArrayList<>(List.of()));

        // step 93: m.put(93, 0, [])
        m.put(93, 0, new ArrayList<>(List.of()));

        // step 94: m.put(94, 0, [])
        m.put(94, 0, new ArrayList<>(List.of()));

        // step 95: m.put(95, 0, [])
        m.put(95, 0, new ArrayList<>(List.of()));

        // step 96: m.put(96, 0, [])
        m.put(96, 0, new ArrayList<>(List.of()));

        // step 97: m.put(97, 0, [])
        m.put(97, 0, new ArrayList<>(List.of()));

        // step 98: it = iter(m); [next(it) for _ in range(0)]; m.remove(-1, -1); list(it) # live iteration across a change   <-- fails here
        // P7: The map raises where Flink raises, and nowhere else. (docs/contract.md#p7)
        // the model expects: each entry once, or a ConcurrentModificationException exactly when the change was structural
        Iterator<StateEntry<Object, Object, List<Integer>>> it = m.iterator();
        List<String> seen = new ArrayList<>();
        for (int i = 0; i < 0 && it.hasNext(); i++) seen.add(pair(it.next()));
        m.remove(-1, -1);
        boolean raised = false;
        try {
            while (it.hasNext()) seen.add(pair(it.next()));
        } catch (ConcurrentModificationException e) {
            raised = true;
        }
        assertFalse(raised, "P7: it = iter(m); [next(it) for _ in range(0)]; m.remove(-1, -1); list(it)  # live iteration across a change: raised without a structural change");
        Set<String> visited = new HashSet<>(seen);
        Set<String> may = Set.of("(0, 0)", "(1, 0)", "(10, 0)", "(11, 0)", "(12, 0)", "(13, 0)", "(14, 0)", "(15, 0)", "(16, 0)", "(17, 0)", "(18, 0)", "(19, 0)", "(2, 0)", "(20, 0)", "(21, 0)", "(22, 0)", "(23, 0)", "(24, 0)", "(25, 0)", "(26, 0)", "(27, 0)", "(28, 0)", "(29, 0)", "(3, 0)", "(30, 0)", "(31, 0)", "(32, 0)", "(33, 0)", "(34, 0)", "(35, 0)", "(36, 0)", "(37, 0)", "(38, 0)", "(39, 0)", "(4, 0)", "(40, 0)", "(41, 0)", "(42, 0)", "(43, 0)", "(44, 0)", "(45, 0)", "(46, 0)", "(47, 0)", "(48, 0)", "(49, 0)", "(5, 0)", "(50, 0)", "(51, 0)", "(52, 0)", "(53, 0)", "(54, 0)", "(55, 0)", "(56, 0)", "(57, 0)", "(58, 0)", "(59, 0)", "(6, 0)", "(60, 0)", "(61, 0)", "(62, 0)", "(63, 0)", "(64, 0)", "(65, 0)", "(66, 0)", "(67, 0)", "(68, 0)", "(69, 0)", "(7, 0)", "(70, 0)", "(71, 0)", "(72, 0)", "(73, 0)", "(74, 0)", "(75, 0)", "(76, 0)", "(77, 0)", "(78, 0)", "(79, 0)", "(8, 0)", "(80, 0)", "(81, 0)", "(82, 0)", "(83, 0)", "(84, 0)", "(85, 0)", "(86, 0)", "(87, 0)", "(88, 0)", "(89, 0)", "(9, 0)", "(90, 0)", "(91, 0)", "(92, 0)", "(93, 0)", "(94, 0)", "(95, 0)", "(96, 0)", "(97, 0)");
        assertTrue(may.containsAll(visited), "P1: it = iter(m); [next(it) for _ in range(0)]; m.remove(-1, -1); list(it)  # live iteration across a change: entries the map never held; it returned " + seen);
        Set<String> must = Set.of("(0, 0)", "(1, 0)", "(10, 0)", "(11, 0)", "(12, 0)", "(13, 0)", "(14, 0)", "(15, 0)", "(16, 0)", "(17, 0)", "(18, 0)", "(19, 0)", "(2, 0)", "(20, 0)", "(21, 0)", "(22, 0)", "(23, 0)", "(24, 0)", "(25, 0)", "(26, 0)", "(27, 0)", "(28, 0)", "(29, 0)", "(3, 0)", "(30, 0)", "(31, 0)", "(32, 0)", "(33, 0)", "(34, 0)", "(35, 0)", "(36, 0)", "(37, 0)", "(38, 0)", "(39, 0)", "(4, 0)", "(40, 0)", "(41, 0)", "(42, 0)", "(43, 0)", "(44, 0)", "(45, 0)", "(46, 0)", "(47, 0)", "(48, 0)", "(49, 0)", "(5, 0)", "(50, 0)", "(51, 0)", "(52, 0)", "(53, 0)", "(54, 0)", "(55, 0)", "(56, 0)", "(57, 0)", "(58, 0)", "(59, 0)", "(6, 0)", "(60, 0)", "(61, 0)", "(62, 0)", "(63, 0)", "(64, 0)", "(65, 0)", "(66, 0)", "(67, 0)", "(68, 0)", "(69, 0)", "(7, 0)", "(70, 0)", "(71, 0)", "(72, 0)", "(73, 0)", "(74, 0)", "(75, 0)", "(76, 0)", "(77, 0)", "(78, 0)", "(79, 0)", "(8, 0)", "(80, 0)", "(81, 0)", "(82, 0)", "(83, 0)", "(84, 0)", "(85, 0)", "(86, 0)", "(87, 0)", "(88, 0)", "(89, 0)", "(9, 0)", "(90, 0)", "(91, 0)", "(92, 0)", "(93, 0)", "(94, 0)", "(95, 0)", "(96, 0)", "(97, 0)");
        assertEquals(visited.size(), seen.size(), "P7: it = iter(m); [next(it) for _ in range(0)]; m.remove(-1, -1); list(it)  # live iteration across a change: live iteration repeated entries; it returned " + seen);
        assertTrue(visited.containsAll(must), "P7: it = iter(m); [next(it) for _ in range(0)]; m.remove(-1, -1); list(it)  # live iteration across a change: live iteration skipped entries; it returned " + seen);
    }

    /** An entry as "(key, namespace)". */
    static String pair(StateEntry<Object, Object, List<Integer>> e) {
        return "(" + e.getKey() + ", " + e.getNamespace() + ")";
    }
}
