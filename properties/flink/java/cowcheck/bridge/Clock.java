package cowcheck.bridge;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Flink's own time in a segment of a batched walk ({@link Walk}): the step time limit charges an
 * implementation for its calls only, never for cowcheck's checking (the invariants of {@link
 * Checker}), encoding or recording (properties/core/limits.py, metered calls).
 *
 * <p>Each call into Flink's map is bracketed by {@link #in()} and {@link #out()} ({@link #pause()}
 * inside one call of the harness's that spans several of Flink's, such as an iteration, whose rows
 * are recorded between them). Two things come of it:
 *
 * <ul>
 *   <li>the longest call of each step, in nanoseconds ({@link #step()}), recorded with the step:
 *       Python charges it against the run's pace and limit as the step is applied, so a slow call
 *       is a TIMEOUT of the very step that made it;
 *   <li>a phase counter in memory Python owns ({@code shared}, 8 bytes, native order): odd while
 *       a call of Flink's runs, bumped as each starts and ends. The step time limit's watchdog
 *       reads it without calling into the JVM: a phase odd and unchanged for longer than the
 *       limit is a call of Flink's that does not return (the process is ended, as for any call
 *       stuck in native code); an even one is cowcheck's own work.
 * </ul>
 */
final class Clock {
    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class,
            ByteOrder.nativeOrder());

    private final ByteBuffer shared; // null: no watchdog reads the phase
    private long phase; // even: cowcheck's own work; odd: inside a call of Flink's
    private boolean inside; // a call of Flink's (or the current part of one) runs
    private long started; // System.nanoTime() when it started
    private long call; // the current call of the harness's so far, in ns (parts of an iteration add up)
    private long longest; // the step's longest call so far, in ns

    Clock(ByteBuffer shared) {
        this.shared = shared;
    }

    /** A call of Flink's starts (or the next part of one, after {@link #pause()}); no-op inside one. */
    void in() {
        if (!inside) {
            inside = true;
            publish();
            started = System.nanoTime();
        }
    }

    /** The part of the call that started at {@link #in()} ends; the call goes on after a later {@code in()}. */
    void pause() {
        if (inside) {
            call += System.nanoTime() - started;
            inside = false;
            publish();
        }
    }

    /** The call of Flink's ends (all its parts). */
    void out() {
        pause();
        longest = Math.max(longest, call);
        call = 0;
    }

    /** The step's longest call in ns, and a fresh count for the next step. */
    long step() {
        out();
        long l = longest;
        longest = 0;
        return l;
    }

    private void publish() {
        phase++;
        if (shared != null) {
            LONGS.setOpaque(shared, 0, phase); // opaque: never elided or held back, seen by the watchdog's thread
        }
    }
}
