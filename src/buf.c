/* buf.c: input buffers, chunked output queues and the chunk pool. */
#include "buf.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct buf_chunk {
	struct buf_chunk *next;
	uint32_t start;		/* first unsent byte */
	uint32_t end;		/* one past the last queued byte */
	uint8_t	data[BUF_CHUNK_SIZE];
};

struct buf *
buf_new(void)
{
	return xcalloc(1, sizeof(struct buf));
}

void
buf_free(struct buf *b)
{
	if (b == NULL)
		return;
	free(b->data);
	free(b);
}

uint8_t *
buf_reserve(struct buf *b, size_t n)
{
	if (b->cap - b->off - b->len >= n)
		return b->data + b->off + b->len;
	/* Slide the data to the front before growing. */
	if (b->off > 0) {
		memmove(b->data, b->data + b->off, b->len);
		b->off = 0;
		if (b->cap - b->len >= n)
			return b->data + b->len;
	}
	size_t cap = b->cap ? b->cap : 512;
	while (cap - b->len < n)
		cap *= 2;
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
	return b->data + b->len;
}

void
buf_append(struct buf *b, const void *p, size_t n)
{
	memcpy(buf_reserve(b, n), p, n);
	b->len += n;
}

void
buf_consume(struct buf *b, size_t n)
{
	assert(n <= b->len);
	b->len -= n;
	b->off = b->len == 0 ? 0 : b->off + n;
}

void
buf_pool_init(struct buf_pool *pool, size_t max)
{
	pool->free = NULL;
	pool->nfree = 0;
	pool->max = max;
}

void
buf_pool_fini(struct buf_pool *pool)
{
	struct buf_chunk *ch;

	while ((ch = pool->free) != NULL) {
		pool->free = ch->next;
		free(ch);
	}
	pool->nfree = 0;
}

static struct buf_chunk *
chunk_get(struct buf_pool *pool)
{
	struct buf_chunk *ch = pool->free;

	if (ch != NULL) {
		pool->free = ch->next;
		pool->nfree--;
	} else {
		ch = xmalloc(sizeof(*ch));
	}
	ch->next = NULL;
	ch->start = ch->end = 0;
	return ch;
}

static void
chunk_put(struct buf_pool *pool, struct buf_chunk *ch)
{
	if (pool->nfree >= pool->max) {
		free(ch);
		return;
	}
	ch->next = pool->free;
	pool->free = ch;
	pool->nfree++;
}

void
outq_append(struct outq *q, struct buf_pool *pool, const void *p, size_t n)
{
	const uint8_t *src = p;

	q->bytes += n;
	while (n > 0) {
		struct buf_chunk *t = q->tail;
		size_t room;

		if (t == NULL || t->end == BUF_CHUNK_SIZE) {
			t = chunk_get(pool);
			if (q->tail != NULL)
				q->tail->next = t;
			else
				q->head = t;
			q->tail = t;
		}
		room = BUF_CHUNK_SIZE - t->end;
		if (room > n)
			room = n;
		memcpy(t->data + t->end, src, room);
		t->end += (uint32_t)room;
		src += room;
		n -= room;
	}
}

int
outq_iov(const struct outq *q, struct iovec *iov, int max)
{
	int n = 0;

	for (struct buf_chunk *ch = q->head; ch != NULL && n < max;
	    ch = ch->next) {
		iov[n].iov_base = ch->data + ch->start;
		iov[n].iov_len = ch->end - ch->start;
		n++;
	}
	return n;
}

void
outq_consume(struct outq *q, struct buf_pool *pool, size_t n)
{
	assert(n <= q->bytes);
	q->bytes -= n;
	while (n > 0) {
		struct buf_chunk *h = q->head;
		size_t have = h->end - h->start;

		if (n < have) {
			h->start += (uint32_t)n;
			return;
		}
		n -= have;
		q->head = h->next;
		if (q->head == NULL)
			q->tail = NULL;
		chunk_put(pool, h);
	}
}

void
outq_clear(struct outq *q, struct buf_pool *pool)
{
	outq_consume(q, pool, q->bytes);
}
