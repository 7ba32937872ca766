package cowcheck.bridge;

import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.Map;

/**
 * Numbers objects by identity (never by equals: ArrayList.equals compares content). Ids start at
 * 1 and are never reused, so an id that Python still remembers can never name another object.
 */
final class Registry {
    private final IdentityHashMap<Object, Integer> ids = new IdentityHashMap<>();
    private Object[] objects = new Object[256];
    private int next = 1;

    /** The id of {@code o}, 0 if it has none. */
    int idOf(Object o) {
        Integer id = ids.get(o);
        return id == null ? 0 : id;
    }

    /** 0 for null, the id of a registered object, or {@code -id} after registering a new one. */
    int code(Object o) {
        if (o == null) {
            return 0;
        }
        Integer id = ids.get(o);
        return id != null ? id : -register(o);
    }

    int register(Object o) {
        int id = next++;
        if (id >= objects.length) {
            objects = Arrays.copyOf(objects, objects.length * 2);
        }
        objects[id] = o;
        ids.put(o, id);
        return id;
    }

    /** The object with this id; IllegalArgumentException if it was never registered or was dropped. */
    Object get(int id) {
        Object o = id > 0 && id < next ? objects[id] : null;
        if (o == null) {
            throw new IllegalArgumentException("no object with id " + id + " (never registered or dropped)");
        }
        return o;
    }

    int size() {
        return ids.size();
    }

    /** Drops every object not in {@code keep}; returns the dropped ids. */
    int[] retainOnly(Map<Object, ?> keep) {
        int[] dropped = new int[ids.size()];
        int n = 0;
        for (var it = ids.entrySet().iterator(); it.hasNext(); ) {
            var e = it.next();
            if (!keep.containsKey(e.getKey())) {
                dropped[n++] = e.getValue();
                objects[e.getValue()] = null;
                it.remove();
            }
        }
        return Arrays.copyOf(dropped, n);
    }
}
