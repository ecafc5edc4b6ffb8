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

size_t
u64_to_dec(char *buf, uint64_t v)
{
	uint64_t pow = 10;
	size_t n = 1;
	char *p;

	/* Digits: 20 for v >= 10^19, where 10^20 would not fit. */
	while (n < 20 && v >= pow) {
		n++;
		pow *= 10;
	}
	p = buf + n;
	while (v >= 100) {
		unsigned d = (unsigned)(v % 100) * 2;

		v /= 100;
		*--p = dec_pairs[d + 1];
		*--p = dec_pairs[d];
	}
	if (v >= 10) {
		*--p = dec_pairs[v * 2 + 1];
		*--p = dec_pairs[v * 2];
	} else {
		*--p = (char)('0' + v);
	}
	return n;
}

uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
