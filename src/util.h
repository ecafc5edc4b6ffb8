/* util.h: the out-of-memory policy and small helpers shared by every module. */
#ifndef ECHOROUTERD_UTIL_H
#define ECHOROUTERD_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * Out-of-memory policy: the x* allocators never return NULL. Memory use is
 * bounded by configuration (connections, limits), so running out means the
 * host is in trouble; they log one line and abort rather than limp on with
 * half-built state.
 */
void	*xmalloc(size_t size);
void	*xcalloc(size_t n, size_t size);
void	*xrealloc(void *p, size_t size);
char	*xstrdup(const char *s);
/* Zeroed memory aligned to align (a power of two), for free(). */
void	*xzalloc_aligned(size_t align, size_t size);

/*
 * One thread's spare objects of one size, for what a reactor makes and
 * frees for every message (a line client's reply, an upstream job): one
 * turn makes hundreds, past the seven of a size that glibc's thread cache
 * keeps, and each one past those costs a full malloc and free. Under load
 * thousands are in flight at once (a window of a thousand senders), so up
 * to SPARES_MAX are kept; spares_trim, called about once a second, frees
 * those that sat unused since the last call, so that what a burst left
 * goes back within seconds. Each is a plain malloc chunk, so free() may
 * take one wherever its owner is not at hand. The owner's thread only.
 */
#define SPARES_MAX	4096

struct spares {
	void	*head;
	unsigned n;
	unsigned low;		/* the fewest kept since the last trim */
	size_t	size;		/* of each: the gets' */
};

/* An object of size bytes (always the same for s), zeroed. */
void	*spares_get(struct spares *s, size_t size);
/* The same, not zeroed: for what the caller fills itself. */
void	*spares_take(struct spares *s, size_t size);
/* Keeps p (from spares_get on s, or malloc of that size) or frees it. */
void	spares_put(struct spares *s, void *p);
/* Frees the spares none of the gets since the last trim needed. */
void	spares_trim(struct spares *s);
/* Frees what s keeps. */
void	spares_drain(struct spares *s);

/* FNV-1a, an octet at a time: from FNV1A_START, h = fnv1a_step(h, c). */
#define FNV1A_START	2166136261u
static inline uint32_t
fnv1a_step(uint32_t h, unsigned char c)
{
	return (h ^ c) * 16777619u;
}

/* FNV-1a of the string s: the tables' hash of names and addresses. */
static inline uint32_t
fnv1a_str(const char *s)
{
	uint32_t h = FNV1A_START;

	for (; *s != '\0'; s++)
		h = fnv1a_step(h, (unsigned char)*s);
	return h;
}

/*
 * Sixteen octets as one value, for checks of a run of text at once with
 * GCC's vector extension: SSE2 on x86-64, NEON on arm64, words elsewhere.
 * A comparison gives each lane -1 (true) or 0.
 */
typedef int8_t x16 __attribute__((vector_size(16)));
typedef uint8_t ux16 __attribute__((vector_size(16)));

static inline x16
x16_load(const uint8_t *p)
{
	x16 x;

	memcpy(&x, p, sizeof(x));
	return x;
}

/* Each lane of x: whether its octet is from lo to hi. */
static inline x16
x16_in(x16 x, uint8_t lo, uint8_t hi)
{
	/* Moved so that lo is the lowest signed octet: one compare. */
	x16 y = (x16)((ux16)x + (uint8_t)(0x80 - lo));

	return y <= (int8_t)(hi - lo - 0x80);
}

/* Whether every lane of m is true. */
static inline bool
x16_all(x16 m)
{
#if defined(__SSE2__)
	typedef char c16 __attribute__((vector_size(16)));

	return __builtin_ia32_pmovmskb128((c16)m) == 0xFFFF;
#else
	uint64_t h[2];

	memcpy(h, &m, sizeof(h));
	return (h[0] & h[1]) == UINT64_MAX;
#endif
}

/* Whether each of the sixteen octets at p is from lo to hi. */
static inline bool
u8x16_within(const uint8_t *p, uint8_t lo, uint8_t hi)
{
	return x16_all(x16_in(x16_load(p), lo, hi));
}

/* Compares secrets in time that does not depend on where they differ. */
bool	secret_eq(const char *a, const char *b);

/*
 * Writes v in decimal at buf, which has room for 20 bytes; no NUL. Returns
 * the length. For replies built per message, where snprintf costs more
 * than the rest of the reply.
 */
size_t	u64_to_dec(char *buf, uint64_t v);

/*
 * Copies src into dst (cap bytes, cap > 0), cut at cap - 1 bytes, always
 * NUL-terminated; returns the length copied. snprintf(dst, cap, "%s", src)
 * without the format's cost, for fields filled per message.
 */
size_t	str_copy(char *dst, size_t cap, const char *src);

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Keeps per-thread data written by one thread off other threads' lines. */
#define CACHE_LINE 64

/* CLOCK_MONOTONIC in milliseconds, and in microseconds. */
uint64_t mono_ms(void);
uint64_t mono_us(void);

#endif
