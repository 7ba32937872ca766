package cowcheck.bridge;

/**
 * What the Java side asks of Python (implemented in properties/flink/map.py with a JPype proxy).
 *
 * <p>State codes: 0 is null; a positive number is the id of a state object whose Python twin
 * exists; a negative number {@code -id} is a state object the Java side has just registered,
 * whose content Python fetches with {@link MapHandle#content(int)} to build the twin.
 */
public interface PythonSide {

    /** Current content of the Python twin of state {@code id}: Python owns state content. */
    int[] twinContent(int id);

    /** Runs the pending transform function on the previous state; returns the new state's id (0: null). */
    int transform(int previousStateCode);

    /** Runs the pending snapshot transformer on a state; returns the resulting state's id (0: drop). */
    int filterOrTransform(int stateCode);
}
