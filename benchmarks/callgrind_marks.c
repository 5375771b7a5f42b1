/* Callgrind's client requests, for benchmarks/run.py (loaded with ctypes).
 *
 * Python cannot issue a client request itself: these let the measured script switch
 * instrumentation on only around the calls it measures (the interpreter's start-up and the
 * warm-up run uninstrumented, ~10 times faster), and cut the count where it wants, named.
 * Outside valgrind each request is a few no-op instructions.
 */
#include <valgrind/callgrind.h>

void start_instrumentation(void) { CALLGRIND_START_INSTRUMENTATION; }
void stop_instrumentation(void) { CALLGRIND_STOP_INSTRUMENTATION; }
void zero_stats(void) { CALLGRIND_ZERO_STATS; }
void dump_stats_at(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
