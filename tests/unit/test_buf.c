/* test_buf.c: input buffers, chunked output queues and the chunk pool. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "suites.h"

/* A byte pattern that differs at every offset within a few chunks. */
static uint8_t
pattern(size_t i)
{
	return (uint8_t)(i * 131 + (i >> 8) * 7 + 3);
}

static void
fill(uint8_t *p, size_t off, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(off + i);
}

/* Appends pattern bytes [off, off + n) to q in pieces of piece bytes. */
static void
outq_append_pattern(struct outq *q, struct buf_pool *pool, size_t off,
    size_t n, size_t piece)
{
	uint8_t tmp[5000];

	ck_assert_uint_le(piece, sizeof(tmp));
	while (n > 0) {
		size_t k = n < piece ? n : piece;

		fill(tmp, off, k);
		outq_append(q, pool, tmp, k);
		off += k;
		n -= k;
	}
}

/* Checks that q holds exactly the pattern bytes [off, off + n). */
static void
outq_check_pattern(const struct outq *q, size_t off, size_t n)
{
	static struct iovec iov[1024];
	int cnt = outq_iov(q, iov, 1024);
	size_t total = 0;

	ck_assert_uint_eq(q->bytes, n);
	ck_assert_int_lt(cnt, 1024);
	for (int i = 0; i < cnt; i++) {
		const uint8_t *p = iov[i].iov_base;

		ck_assert_uint_gt(iov[i].iov_len, 0);
		ck_assert_uint_le(iov[i].iov_len, BUF_CHUNK_SIZE);
		for (size_t j = 0; j < iov[i].iov_len; j++)
			if (p[j] != pattern(off + total + j))
				ck_abort_msg("byte %zu of the queue differs",
				    total + j);
		total += iov[i].iov_len;
	}
	ck_assert_uint_eq(total, n);
}

START_TEST(buf_append_consume)
{
	struct buf *b = buf_new();

	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(b->len, 0);
	ck_assert_uint_eq(b->off, 0);
	buf_append(b, "hello world", 11);
	ck_assert_uint_eq(b->len, 11);
	ck_assert_mem_eq(buf_head(b), "hello world", 11);
	buf_consume(b, 6);
	ck_assert_uint_eq(b->len, 5);
	ck_assert_uint_eq(b->off, 6);
	ck_assert_mem_eq(buf_head(b), "world", 5);
	buf_append(b, "!", 1);
	ck_assert_mem_eq(buf_head(b), "world!", 6);
	buf_consume(b, 0);
	ck_assert_uint_eq(b->len, 6);
	/* Emptying the buffer rewinds it. */
	buf_consume(b, 6);
	ck_assert_uint_eq(b->len, 0);
	ck_assert_uint_eq(b->off, 0);
	buf_append(b, "x", 1);
	ck_assert_ptr_eq(buf_head(b), b->data);
	ck_assert_int_eq(buf_head(b)[0], 'x');
	buf_free(b);
	buf_free(NULL);
}
END_TEST

START_TEST(buf_reserve_then_commit)
{
	struct buf *b = buf_new();
	uint8_t *w;

	buf_append(b, "ab", 2);
	w = buf_reserve(b, 1000);
	ck_assert_ptr_eq(w, buf_head(b) + b->len);
	ck_assert_uint_ge(b->cap - b->off - b->len, 1000);
	fill(w, 0, 1000);
	b->len += 1000;
	ck_assert_mem_eq(buf_head(b), "ab", 2);
	for (size_t i = 0; i < 1000; i++)
		ck_assert_uint_eq(buf_head(b)[2 + i], pattern(i));
	/* A reservation that fits changes nothing. */
	{
		uint8_t *data = b->data;
		size_t cap = b->cap;

		w = buf_reserve(b, b->cap - b->off - b->len);
		ck_assert_ptr_eq(b->data, data);
		ck_assert_uint_eq(b->cap, cap);
		ck_assert_ptr_eq(w, buf_head(b) + b->len);
	}
	buf_free(b);
}
END_TEST

START_TEST(buf_compacts_before_growing)
{
	struct buf *b = buf_new();
	uint8_t tmp[400];
	uint8_t *data, *w;
	size_t cap;

	fill(tmp, 0, sizeof(tmp));
	buf_append(b, tmp, 400);
	cap = b->cap;
	data = b->data;
	ck_assert_uint_ge(cap, 400);
	buf_consume(b, 300);
	ck_assert_uint_eq(b->off, 300);
	/* Room after the data is short, but sliding it down makes enough. */
	w = buf_reserve(b, cap - 100);
	ck_assert_uint_eq(b->off, 0);
	ck_assert_uint_eq(b->cap, cap);
	ck_assert_ptr_eq(b->data, data);
	ck_assert_ptr_eq(w, b->data + 100);
	for (size_t i = 0; i < 100; i++)
		ck_assert_uint_eq(b->data[i], pattern(300 + i));
	buf_free(b);
}
END_TEST

START_TEST(buf_grows_and_keeps_content)
{
	struct buf *b = buf_new();
	uint8_t tmp[777];
	size_t total = 0, dropped = 0;

	for (int round = 0; round < 200; round++) {
		fill(tmp, total, sizeof(tmp));
		buf_append(b, tmp, sizeof(tmp));
		total += sizeof(tmp);
		ck_assert_uint_le(b->off + b->len, b->cap);
		if (round % 3 == 0) {
			buf_consume(b, 500);
			dropped += 500;
		}
	}
	ck_assert_uint_eq(b->len, total - dropped);
	/* Capacity grows by doubling, not by the byte. */
	ck_assert_uint_lt(b->cap, 4 * (total - dropped) + 512);
	for (size_t i = 0; i < b->len; i++)
		if (buf_head(b)[i] != pattern(dropped + i))
			ck_abort_msg("byte %zu differs after growth", i);
	buf_free(b);
}
END_TEST

START_TEST(buf_large_reserve_on_empty)
{
	struct buf *b = buf_new();
	uint8_t *w = buf_reserve(b, 100000);

	ck_assert_ptr_nonnull(w);
	ck_assert_uint_ge(b->cap, 100000);
	memset(w, 0xab, 100000);
	b->len = 100000;
	buf_consume(b, 99999);
	ck_assert_uint_eq(buf_head(b)[0], 0xab);
	buf_free(b);
}
END_TEST

START_TEST(outq_empty)
{
	struct outq q = { 0 };
	struct buf_pool pool;
	struct iovec iov[4];

	buf_pool_init(&pool, 4);
	ck_assert_int_eq(outq_iov(&q, iov, 4), 0);
	outq_consume(&q, &pool, 0);
	outq_clear(&q, &pool);
	ck_assert_ptr_null(q.head);
	ck_assert_ptr_null(q.tail);
	ck_assert_uint_eq(q.bytes, 0);
	ck_assert_uint_eq(pool.nfree, 0);
	buf_pool_fini(&pool);
}
END_TEST

START_TEST(outq_spans_chunks)
{
	struct outq q = { 0 };
	struct buf_pool pool;
	struct iovec iov[8];
	size_t total = 3 * BUF_CHUNK_SIZE + 123;

	buf_pool_init(&pool, 8);
	outq_append_pattern(&q, &pool, 0, total, 4999);
	ck_assert_uint_eq(q.bytes, total);
	ck_assert_int_eq(outq_iov(&q, iov, 8), 4);
	ck_assert_uint_eq(iov[0].iov_len, BUF_CHUNK_SIZE);
	ck_assert_uint_eq(iov[1].iov_len, BUF_CHUNK_SIZE);
	ck_assert_uint_eq(iov[2].iov_len, BUF_CHUNK_SIZE);
	ck_assert_uint_eq(iov[3].iov_len, 123);
	outq_check_pattern(&q, 0, total);
	/* Fewer iovecs than chunks: the first ones only. */
	ck_assert_int_eq(outq_iov(&q, iov, 2), 2);
	ck_assert_uint_eq(iov[1].iov_len, BUF_CHUNK_SIZE);
	outq_clear(&q, &pool);
	buf_pool_fini(&pool);
}
END_TEST

START_TEST(outq_exact_chunk_boundary)
{
	struct outq q = { 0 };
	struct buf_pool pool;
	struct iovec iov[4];

	buf_pool_init(&pool, 4);
	outq_append_pattern(&q, &pool, 0, BUF_CHUNK_SIZE, 4096);
	ck_assert_int_eq(outq_iov(&q, iov, 4), 1);
	ck_assert_ptr_eq(q.head, q.tail);
	outq_append_pattern(&q, &pool, BUF_CHUNK_SIZE, 1, 1);
	ck_assert_int_eq(outq_iov(&q, iov, 4), 2);
	ck_assert_uint_eq(iov[1].iov_len, 1);
	outq_check_pattern(&q, 0, BUF_CHUNK_SIZE + 1);
	/* Consuming exactly the first chunk gives it back to the pool. */
	outq_consume(&q, &pool, BUF_CHUNK_SIZE);
	ck_assert_uint_eq(pool.nfree, 1);
	outq_check_pattern(&q, BUF_CHUNK_SIZE, 1);
	outq_consume(&q, &pool, 1);
	ck_assert_ptr_null(q.head);
	ck_assert_ptr_null(q.tail);
	ck_assert_uint_eq(pool.nfree, 2);
	/* An emptied queue takes appends again. */
	outq_append_pattern(&q, &pool, 7, 10, 10);
	ck_assert_uint_eq(pool.nfree, 1);
	outq_check_pattern(&q, 7, 10);
	outq_clear(&q, &pool);
	buf_pool_fini(&pool);
	ck_assert_uint_eq(pool.nfree, 0);
	ck_assert_ptr_null(pool.free);
}
END_TEST

START_TEST(outq_partial_consume_mid_chunk)
{
	struct outq q = { 0 };
	struct buf_pool pool;
	struct iovec iov[8];
	size_t total = 2 * BUF_CHUNK_SIZE + 500, gone = 0;

	buf_pool_init(&pool, 8);
	outq_append_pattern(&q, &pool, 0, total, 1000);
	outq_consume(&q, &pool, 100);
	gone += 100;
	ck_assert_int_eq(outq_iov(&q, iov, 8), 3);
	ck_assert_uint_eq(iov[0].iov_len, BUF_CHUNK_SIZE - 100);
	ck_assert_uint_eq(pool.nfree, 0);
	outq_check_pattern(&q, gone, total - gone);
	/* Across the first chunk's end into the middle of the second. */
	outq_consume(&q, &pool, BUF_CHUNK_SIZE - 100 + 50);
	gone += BUF_CHUNK_SIZE - 100 + 50;
	ck_assert_uint_eq(pool.nfree, 1);
	ck_assert_int_eq(outq_iov(&q, iov, 8), 2);
	ck_assert_uint_eq(iov[0].iov_len, BUF_CHUNK_SIZE - 50);
	outq_check_pattern(&q, gone, total - gone);
	/* Appending after a partial consume fills the tail first. */
	outq_append_pattern(&q, &pool, total, 300, 300);
	total += 300;
	ck_assert_int_eq(outq_iov(&q, iov, 8), 2);
	ck_assert_uint_eq(iov[1].iov_len, 800);
	outq_check_pattern(&q, gone, total - gone);
	outq_consume(&q, &pool, total - gone - 1);
	gone = total - 1;
	outq_check_pattern(&q, gone, 1);
	ck_assert_ptr_eq(q.head, q.tail);
	outq_clear(&q, &pool);
	ck_assert_uint_eq(q.bytes, 0);
	ck_assert_ptr_null(q.head);
	ck_assert_uint_eq(pool.nfree, 3);
	buf_pool_fini(&pool);
}
END_TEST

START_TEST(outq_pool_reuse_bounded)
{
	struct outq q = { 0 };
	struct buf_pool pool;
	struct iovec iov[8];
	void *bases[5];

	buf_pool_init(&pool, 2);
	outq_append_pattern(&q, &pool, 0, 5 * BUF_CHUNK_SIZE, 4096);
	ck_assert_int_eq(outq_iov(&q, iov, 8), 5);
	for (int i = 0; i < 5; i++)
		bases[i] = iov[i].iov_base;
	outq_clear(&q, &pool);
	/* Only max chunks are kept; the others were freed. */
	ck_assert_uint_eq(pool.nfree, 2);
	ck_assert_uint_eq(q.bytes, 0);
	ck_assert_int_eq(outq_iov(&q, iov, 8), 0);
	/* The kept ones come back, most recently returned first. */
	outq_append_pattern(&q, &pool, 0, 2 * BUF_CHUNK_SIZE, 4096);
	ck_assert_uint_eq(pool.nfree, 0);
	ck_assert_int_eq(outq_iov(&q, iov, 8), 2);
	ck_assert_ptr_eq(iov[0].iov_base, bases[1]);
	ck_assert_ptr_eq(iov[1].iov_base, bases[0]);
	outq_check_pattern(&q, 0, 2 * BUF_CHUNK_SIZE);
	/* Reused chunks start empty. */
	outq_consume(&q, &pool, 2 * BUF_CHUNK_SIZE);
	outq_append_pattern(&q, &pool, 9, 5, 5);
	ck_assert_int_eq(outq_iov(&q, iov, 8), 1);
	ck_assert_uint_eq(iov[0].iov_len, 5);
	outq_check_pattern(&q, 9, 5);
	outq_clear(&q, &pool);
	buf_pool_fini(&pool);
}
END_TEST

START_TEST(outq_pool_max_zero)
{
	struct outq q = { 0 };
	struct buf_pool pool;

	buf_pool_init(&pool, 0);
	outq_append_pattern(&q, &pool, 0, 3 * BUF_CHUNK_SIZE, 4096);
	outq_clear(&q, &pool);
	ck_assert_uint_eq(pool.nfree, 0);
	ck_assert_ptr_null(pool.free);
	buf_pool_fini(&pool);
}
END_TEST

/* Random appends and consumes against a plain byte counter. */
START_TEST(outq_random_model)
{
	struct outq q = { 0 };
	struct buf_pool pool;
	size_t head = 0, tail = 0;
	uint32_t seed = 12345;

	buf_pool_init(&pool, 3);
	for (int step = 0; step < 2000; step++) {
		seed = seed * 1103515245u + 12345u;
		size_t n = (seed >> 8) % 4500;

		if ((seed >> 4) % 3 != 0) {
			outq_append_pattern(&q, &pool, tail, n, 4500);
			tail += n;
		} else {
			if (n > tail - head)
				n = tail - head;
			outq_consume(&q, &pool, n);
			head += n;
		}
		ck_assert_uint_eq(q.bytes, tail - head);
		ck_assert_uint_le(pool.nfree, 3);
		if (step % 50 == 0)
			outq_check_pattern(&q, head, tail - head);
	}
	outq_check_pattern(&q, head, tail - head);
	outq_clear(&q, &pool);
	buf_pool_fini(&pool);
}
END_TEST

Suite *
buf_suite(void)
{
	Suite *s = suite_create("buf");
	TCase *tc = tcase_create("buf");
	TCase *tq = tcase_create("outq");

	tcase_add_test(tc, buf_append_consume);
	tcase_add_test(tc, buf_reserve_then_commit);
	tcase_add_test(tc, buf_compacts_before_growing);
	tcase_add_test(tc, buf_grows_and_keeps_content);
	tcase_add_test(tc, buf_large_reserve_on_empty);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	tcase_add_test(tq, outq_empty);
	tcase_add_test(tq, outq_spans_chunks);
	tcase_add_test(tq, outq_exact_chunk_boundary);
	tcase_add_test(tq, outq_partial_consume_mid_chunk);
	tcase_add_test(tq, outq_pool_reuse_bounded);
	tcase_add_test(tq, outq_pool_max_zero);
	tcase_add_test(tq, outq_random_model);
	tcase_set_timeout(tq, 30);
	suite_add_tcase(s, tq);
	return s;
}
