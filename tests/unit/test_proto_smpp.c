/* test_proto_smpp.c: an SMPP bind evicted through proto_evict: an unbind, then closed. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "helpers.h"
#include "proto.h"
#include "reactor.h"
#include "route.h"
#include "smpp_pdu.h"
#include "suites.h"

/* The big-endian 32-bit number at p. */
static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/*
 * Reads from fd until n bytes are in buf or 5 s passed; how many came.
 * *eof says whether the peer closed.
 */
static size_t
read_n(int fd, uint8_t *buf, size_t n, bool *eof)
{
	size_t have = 0;
	uint64_t deadline = unit_now_ms() + 5000;

	*eof = false;
	while (have < n && unit_now_ms() < deadline) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t k;

		if (poll(&p, 1, 50) <= 0)
			continue;
		if ((k = read(fd, buf + have, n - have)) == 0) {
			*eof = true;
			break;
		}
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			break;
		if (k > 0)
			have += (size_t)k;
	}
	return have;
}

/*
 * A bound transceiver, evicted: it leaves the address at once, the ESME
 * gets an unbind (not a line of the router's), and the session closes.
 */
START_TEST(smpp_evicted_unbinds)
{
	struct config *cf = unit_config("shutdown_timeout = 1;\n"
	    "listeners = ( { name = \"s\"; address = \"127.0.0.1\"; "
	    "port = 0; protocol = \"smpp\"; } );\n");
	struct reactor *r = reactor_new(0, cf);
	struct smpp_pdu bind = { .command_id = SMPP_BIND_TRANSCEIVER,
	    .sequence_number = 1, .interface_version = 0x34 };
	struct route_owner o;
	uint8_t out[256], in[SMPP_HEADER_LEN];
	ssize_t len;
	bool eof;
	int sv[2];

	ck_assert_ptr_nonnull(r);
	snprintf(bind.system_id, sizeof(bind.system_id), "t-evicted");
	snprintf(bind.password, sizeof(bind.password), "pw");
	ck_assert_int_gt(len = smpp_encode(&bind, out, sizeof(out)), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(reactor_start(r), 0);
	atomic_fetch_add(&conn_live, 1);
	conn_handoff(r, sv[1], &proto_smpp, 0, NULL, NULL);
	ck_assert_int_eq(write(sv[0], out, (size_t)len), len);
	/* bind_transceiver_resp: its header, then the rest of it. */
	ck_assert_uint_eq(read_n(sv[0], in, SMPP_HEADER_LEN, &eof),
	    SMPP_HEADER_LEN);
	ck_assert_uint_eq(be32(in + 4), SMPP_BIND_TRANSCEIVER | SMPP_RESP);
	ck_assert_uint_eq(be32(in + 8), 0);
	ck_assert_uint_le(be32(in), sizeof(out));
	ck_assert_uint_eq(read_n(sv[0], out, be32(in) - SMPP_HEADER_LEN,
	    &eof), be32(in) - SMPP_HEADER_LEN);
	ck_assert(route_lookup("t-evicted", &o));
	ck_assert_int_eq(o.kind, ROUTE_OWNER_CONN);
	ck_assert_int_eq(proto_evict(&o.conn, PROTO_EVICT_CLAIM_LOST), 0);
	ck_assert_uint_eq(read_n(sv[0], in, SMPP_HEADER_LEN, &eof),
	    SMPP_HEADER_LEN);
	ck_assert_uint_eq(be32(in), SMPP_HEADER_LEN);
	ck_assert_uint_eq(be32(in + 4), SMPP_UNBIND);
	/* Then closed, without waiting for the unbind_resp. */
	ck_assert_uint_eq(read_n(sv[0], in, 1, &eof), 0);
	ck_assert(eof);
	ck_assert(!route_lookup("t-evicted", &o));
	for (int i = 0; i < 500 && atomic_load(&conn_live) != 0; i++)
		unit_sleep_ms(10);
	ck_assert_uint_eq(atomic_load(&conn_live), 0);
	close(sv[0]);
	reactor_stop(r);
	reactor_join(r);
	reactor_free(r);
	config_unref(cf);
}
END_TEST

Suite *
proto_smpp_suite(void)
{
	Suite *s = suite_create("proto_smpp");
	TCase *tc = tcase_create("evict");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, smpp_evicted_unbinds);
	suite_add_tcase(s, tc);
	return s;
}
