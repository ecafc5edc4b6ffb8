/* util.c: allocation wrappers implementing the out-of-memory policy. */
#include "util.h"

#include <stdlib.h>
#include <string.h>
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

size_t
u64_to_dec(char *buf, uint64_t v)
{
	char tmp[20];
	size_t n = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	for (size_t i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}
