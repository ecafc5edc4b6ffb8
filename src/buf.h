/* buf.h: input buffers and chunked output queues, with a per-reactor chunk pool. */
#ifndef ECHOROUTERD_BUF_H
#define ECHOROUTERD_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define BUF_CHUNK_SIZE	16384	/* payload bytes in one output chunk */

/*
 * A contiguous byte buffer: the bytes are data[off .. off + len). Used for
 * input that holds part of a message. None of these functions is thread-safe;
 * the owner of the buffer calls them.
 */
struct buf {
	uint8_t	*data;
	size_t	off;
	size_t	len;
	size_t	cap;
};

/* A new empty buffer, or frees one (buf_free(NULL) is a no-op). */
struct buf *buf_new(void);
void	buf_free(struct buf *b);

/* Makes room for n more bytes after the data; returns the place to write. */
uint8_t	*buf_reserve(struct buf *b, size_t n);

/* Appends n bytes. */
void	buf_append(struct buf *b, const void *p, size_t n);

/* Drops n bytes from the front (n <= len). */
void	buf_consume(struct buf *b, size_t n);

static inline uint8_t *
buf_head(const struct buf *b)
{
	return b->data + b->off;
}

struct buf_chunk;

/* Spare output chunks kept for reuse, up to max. One per reactor. */
struct buf_pool {
	struct buf_chunk *free;
	size_t	nfree;
	size_t	max;
};

/*
 * Output bytes queued in fixed-size chunks, so that appending never moves
 * what is queued and writev(2) can send several chunks at once. An empty
 * queue holds no chunk.
 */
struct outq {
	struct buf_chunk *head;
	struct buf_chunk *tail;
	size_t	bytes;
};

void	buf_pool_init(struct buf_pool *pool, size_t max);
void	buf_pool_fini(struct buf_pool *pool);

/* Appends n bytes to q, taking chunks from pool. */
void	outq_append(struct outq *q, struct buf_pool *pool, const void *p,
	    size_t n);

/* Fills up to max iovecs with the queued bytes; returns how many. */
int	outq_iov(const struct outq *q, struct iovec *iov, int max);

/* Drops n bytes (n <= bytes) from the front, giving chunks back to pool. */
void	outq_consume(struct outq *q, struct buf_pool *pool, size_t n);

/* Drops everything queued. */
void	outq_clear(struct outq *q, struct buf_pool *pool);

#endif
