/* util.c: allocation wrappers implementing the out-of-memory policy. */
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Noreturn void
oom(size_t size)
{
	static const char msg[] = "echorouterd: out of memory\n";

	(void)size;
	/* Not log_*: it may allocate nothing, but keep this path trivial. */
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
		/* Nothing left to do: we abort either way. */
	}
	abort();
}

void *
xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);

	if (p == NULL)
		oom(size);
	return p;
}

void *
xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (p == NULL)
		oom(n * size);
	return p;
}

/*
 * Under AddressSanitizer a spare is poisoned while it waits, so that a
 * use after "free" is caught as it would be without spares.
 */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define SPARE_POISON(p, n)	ASAN_POISON_MEMORY_REGION((p), (n))
#define SPARE_UNPOISON(p, n)	ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define SPARE_POISON(p, n)	((void)(p), (void)(n))
#define SPARE_UNPOISON(p, n)	((void)(p), (void)(n))
#endif

/* The last one kept, off the list. */
static void *
spares_pop(struct spares *s)
{
	void *p = s->head;

	SPARE_UNPOISON(p, s->size);
	memcpy(&s->head, p, sizeof(s->head));
	s->n--;
	return p;
}

void *
spares_take(struct spares *s, size_t size)
{
	void *p;

	s->size = size;
	if (s->head == NULL)
		return xmalloc(size);
	p = spares_pop(s);
	if (s->n < s->low)
		s->low = s->n;
	return p;
}

void *
spares_get(struct spares *s, size_t size)
{
	return memset(spares_take(s, size), 0, size);
}

void
spares_put(struct spares *s, void *p)
{
	if (p == NULL)
		return;
	if (s->n >= SPARES_MAX) {
		free(p);
		return;
	}
	memcpy(p, &s->head, sizeof(s->head));
	s->head = p;
	s->n++;
	SPARE_POISON(p, s->size);
}

void
spares_trim(struct spares *s)
{
	/* The low-water mark's worth were never taken: let them go. */
	for (unsigned k = s->low; k > 0; k--)
		free(spares_pop(s));
	s->low = s->n;
}

void
spares_drain(struct spares *s)
{
	while (s->head != NULL)
		free(spares_pop(s));
	s->n = s->low = 0;
}

void *
xzalloc_aligned(size_t align, size_t size)
{
	void *p;

	if (posix_memalign(&p, align, size ? size : 1) != 0)
		oom(size);
	memset(p, 0, size);
	return p;
}

void *
xrealloc(void *p, size_t size)
{
	void *q = realloc(p, size ? size : 1);

	if (q == NULL)
		oom(size);
	return q;
}

char *
xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(xmalloc(n), s, n);
}

bool
secret_eq(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;

	for (size_t i = 0; i < la && i < lb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

/* "00" "01" ... "99": two digits per division. */
static const char dec_pairs[201] =
	"0001020304050607080910111213141516171819"
	"2021222324252627282930313233343536373839"
	"4041424344454647484950515253545556575859"
	"6061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

/* Writes the 4 digits of v (< 10^4) at p. */
static inline void
dec4(char *p, uint32_t v)
{
	uint32_t hi = v * 5243 >> 19;	/* v / 100, exact below 43,699 */

	memcpy(p, dec_pairs + 2 * hi, 2);
	memcpy(p + 2, dec_pairs + 2 * (v - hi * 100), 2);
}

/* Writes the 8 digits of v (< 10^8) at p. */
static inline void
dec8(char *p, uint32_t v)
{
	uint32_t hi = v / 10000;

	dec4(p, hi);
	dec4(p + 4, v - hi * 10000);
}

/*
 * Message ids run to 19 or 20 digits and two are written per routed
 * message: the number is cut into pieces of 8 digits (and 4 above 10^16)
 * with at most two 64-bit divisions by constants, each piece written two
 * digits a step with 32-bit multiplications; then the leading zeros go.
 */
size_t
u64_to_dec(char *buf, uint64_t v)
{
	char tmp[20], *p;
	size_t n;

	if (v < 100000000) {
		dec8(tmp, (uint32_t)v);
		n = 8;
	} else if (v < 10000000000000000ull) {
		dec8(tmp, (uint32_t)(v / 100000000));
		dec8(tmp + 8, (uint32_t)(v % 100000000));
		n = 16;
	} else {
		uint64_t rest = v % 10000000000000000ull;

		dec4(tmp, (uint32_t)(v / 10000000000000000ull));
		dec8(tmp + 4, (uint32_t)(rest / 100000000));
		dec8(tmp + 12, (uint32_t)(rest % 100000000));
		n = 20;
	}
	for (p = tmp; n > 1 && *p == '0'; p++)
		n--;
	memcpy(buf, p, n);
	return n;
}

uint64_t
mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t
mono_ms(void)
{
	return mono_us() / 1000;
}

size_t
str_copy(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
	return n;
}
