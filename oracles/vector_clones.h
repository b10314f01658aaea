// Hot loops built twice on x86-64 Linux: for AVX2 (four double lanes) and for the baseline,
// picked once at load time (an ifunc). Not FMA: with it GCC would contract a * b + c, which
// changes the values; the clones compute the same bits. Only the marked functions carry AVX2
// code (what they inline is compiled into them), so no shared inline function can leak AVX2
// into callers that run on older CPUs.
#pragma once

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define DETFUZZ_CHANNEL_LOOPS __attribute__((target_clones("avx2", "default")))
#else
#define DETFUZZ_CHANNEL_LOOPS
#endif
