/* test_proto_echo.c: echo framing at a guard page, the registry, a round trip. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "helpers.h"
#include "proto.h"
#include "reactor.h"
#include "suites.h"

/*
 * Two pages, the second PROT_NONE: bytes copied to the end of the first
 * are followed by memory that faults when touched (picohttpparser's trick).
 */
struct guard {
	uint8_t	*base;
	size_t	page;
};

static void
guard_init(struct guard *g)
{
	g->page = (size_t)sysconf(_SC_PAGESIZE);
	g->base = mmap(NULL, 2 * g->page, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(g->base, MAP_FAILED);
	ck_assert_int_eq(mprotect(g->base + g->page, g->page, PROT_NONE), 0);
}

/* Copies n bytes so that they end exactly at the guard page. */
static const uint8_t *
guard_place(struct guard *g, const void *p, size_t n)
{
	uint8_t *at = g->base + g->page - n;

	ck_assert_uint_le(n, g->page);
	memcpy(at, p, n);
	return at;
}

static void
guard_fini(struct guard *g)
{
	munmap(g->base, 2 * g->page);
}

static const struct limits test_limits = {
	.max_line = 64,
	.output_high_watermark = 4096,
	.output_limit = 8192,
};

/* Every prefix of the input is one whole message, read to its end only. */
START_TEST(echo_frame_byte_by_byte)
{
	static const char msg[] = "hello\r\nworld\0\xff\x01 binary too\n";
	const size_t n = sizeof(msg) - 1;
	struct guard g;

	guard_init(&g);
	for (size_t k = 0; k <= n; k++) {
		const uint8_t *p = guard_place(&g, msg, k);

		ck_assert_int_eq(proto_echo.frame_len(p, k, &test_limits),
		    (ssize_t)k);
		/* No side effects: the same bytes give the same answer. */
		ck_assert_int_eq(proto_echo.frame_len(p, k, &test_limits),
		    (ssize_t)k);
	}
	guard_fini(&g);
}
END_TEST

/* A whole page of input, ending at the guard, larger than max_line. */
START_TEST(echo_frame_full_page)
{
	struct guard g;
	uint8_t *page;
	const uint8_t *p;

	guard_init(&g);
	page = malloc(g.page);
	ck_assert_ptr_nonnull(page);
	for (size_t i = 0; i < g.page; i++)
		page[i] = (uint8_t)(i * 7);
	p = guard_place(&g, page, g.page);
	ck_assert_int_eq(proto_echo.frame_len(p, g.page, &test_limits),
	    (ssize_t)g.page);
	ck_assert_int_eq(proto_echo.frame_len(p + g.page - 1, 1,
	    &test_limits), 1);
	free(page);
	guard_fini(&g);
}
END_TEST

START_TEST(echo_frame_empty)
{
	ck_assert_int_eq(proto_echo.frame_len((const uint8_t *)"", 0,
	    &test_limits), 0);
}
END_TEST

START_TEST(echo_registry)
{
	const struct proto *p = proto_find("echo");

	ck_assert_ptr_eq(p, &proto_echo);
	ck_assert_str_eq(p->name, "echo");
	ck_assert_ptr_nonnull(p->frame_len);
	ck_assert_ptr_nonnull(p->on_message);
	ck_assert_ptr_null(proto_find("nope"));
	ck_assert_ptr_null(proto_find(""));
	ck_assert_ptr_null(proto_find("ech"));
	ck_assert_ptr_null(proto_find("echo "));
	ck_assert_ptr_null(proto_find("echoo"));
	ck_assert_ptr_nonnull(strstr(proto_names(), "echo"));
}
END_TEST

/* Waits up to ms for fd to become ready for events; fails otherwise. */
static void
wait_fd(int fd, short events, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int n;

	do {
		n = poll(&pfd, 1, ms);
	} while (n < 0 && errno == EINTR);
	ck_assert_msg(n == 1, "fd %d not ready within %d ms", fd, ms);
}

#define ROUND_TRIP_BYTES	(3 * BUF_CHUNK_SIZE + 4321)

/*
 * Bytes sent on a socket handed to a reactor as an echo connection come
 * back exactly; closing our end closes the connection.
 */
START_TEST(echo_round_trip_on_reactor)
{
	struct config *cf = unit_config("shutdown_timeout = 1;\n"
	    "listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0;"
	    " protocol = \"echo\"; } );\n");
	struct reactor *r = reactor_new(0, cf);
	uint8_t *out = malloc(ROUND_TRIP_BYTES), *in = malloc(ROUND_TRIP_BYTES);
	size_t sent = 0, got = 0;
	uint64_t deadline;
	int sv[2];

	ck_assert_ptr_nonnull(r);
	for (size_t i = 0; i < ROUND_TRIP_BYTES; i++)
		out[i] = (uint8_t)(i * 13 + (i >> 9));
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(reactor_start(r), 0);
	atomic_fetch_add(&conn_live, 1);
	conn_handoff(r, sv[1], &proto_echo, 0, NULL, NULL);
	deadline = unit_now_ms() + 10000;
	while (got < ROUND_TRIP_BYTES) {
		bool progress = false;
		ssize_t n;

		ck_assert_msg(unit_now_ms() < deadline, "echoed %zu of %d",
		    got, ROUND_TRIP_BYTES);
		if (sent < ROUND_TRIP_BYTES) {
			size_t k = ROUND_TRIP_BYTES - sent;

			n = write(sv[0], out + sent, k > 1000 ? 1000 : k);
			if (n > 0) {
				sent += (size_t)n;
				progress = true;
			}
		}
		n = read(sv[0], in + got, ROUND_TRIP_BYTES - got);
		if (n > 0) {
			got += (size_t)n;
			progress = true;
		} else if (n == 0) {
			ck_abort_msg("connection closed after %zu bytes", got);
		}
		if (!progress)
			wait_fd(sv[0], sent < ROUND_TRIP_BYTES ?
			    POLLIN | POLLOUT : POLLIN, 5000);
	}
	ck_assert_mem_eq(in, out, ROUND_TRIP_BYTES);
	ck_assert_uint_eq(counter_get(&r->counters, COUNTER_CONNS), 1);
	ck_assert_uint_eq(counter_get(&r->counters, COUNTER_BYTES_IN),
	    ROUND_TRIP_BYTES);
	/* Our close is seen as EOF: the connection goes. */
	close(sv[0]);
	deadline = unit_now_ms() + 5000;
	/* conn_live drops last when a connection is freed. */
	while (atomic_load(&conn_live) != 0 && unit_now_ms() < deadline)
		unit_sleep_ms(5);
	ck_assert_uint_eq(atomic_load(&conn_live), 0);
	ck_assert_uint_eq(counter_get(&r->counters, COUNTER_CONNS), 0);
	ck_assert_uint_eq(counter_get(&r->counters,
	    COUNTER_CLOSED_PEER), 1);
	reactor_stop(r);
	reactor_join(r);
	ck_assert_uint_eq(counter_get(&r->counters, COUNTER_BYTES_OUT),
	    ROUND_TRIP_BYTES);
	reactor_free(r);
	free(out);
	free(in);
	config_unref(cf);
}
END_TEST

Suite *
proto_echo_suite(void)
{
	Suite *s = suite_create("proto_echo");
	TCase *fr = tcase_create("frame");
	TCase *io = tcase_create("io");

	tcase_add_test(fr, echo_frame_byte_by_byte);
	tcase_add_test(fr, echo_frame_full_page);
	tcase_add_test(fr, echo_frame_empty);
	tcase_add_test(fr, echo_registry);
	tcase_set_timeout(fr, 30);
	suite_add_tcase(s, fr);
	tcase_add_test(io, echo_round_trip_on_reactor);
	tcase_set_timeout(io, 30);
	suite_add_tcase(s, io);
	return s;
}
