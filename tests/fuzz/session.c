/* session.c: a reactor and a socketpair to push fuzz input through real connections. */
#include "session.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "log.h"
#include "proto.h"
#include "reactor.h"

static const char fuzz_conf[] =
    "dispatchers = 1;\n"
    "idle_timeout = 0;\n"
    "listeners = ( { name = \"x\"; address = \"127.0.0.1\"; port = 0;"
    " protocol = \"router\"; } );\n"
    "limits = { max_line = 64; output_high_watermark = 4096;"
    " output_limit = 65536; max_pdu_size = 2048; };\n"
    "routes = ( { prefix = \"+1\"; to = \"a\"; } );\n"
    "smpp = { window = 2; queue_limit = 2; };\n";

static struct reactor *reactor;

static void
fuzz_init(void)
{
	char path[] = "/tmp/erd-fuzz-XXXXXX";
	char *errors = NULL;
	struct config *cf;
	int fd = mkstemp(path);

	/* As in the daemon: a peer gone is an error return, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	if (fd < 0 || write(fd, fuzz_conf, sizeof(fuzz_conf) - 1) < 0)
		abort();
	close(fd);
	proto_builtin_register();	/* as main does, before the config */
	cf = config_load(path, &errors);
	unlink(path);
	if (cf == NULL) {
		fprintf(stderr, "fuzz config: %s", errors);
		abort();
	}
	log_init(LOG_LEVEL_ERROR);
	if ((reactor = reactor_new(0, cf)) == NULL)
		abort();
	config_unref(cf);
}

static void
drain(int fd)
{
	char buf[65536];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

void
fuzz_session(const struct proto *proto, const uint8_t *data, size_t size)
{
	int sv[2];
	size_t off = 0;

	if (reactor == NULL)
		fuzz_init();
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
	    sv) < 0)
		abort();
	atomic_fetch_add(&conn_live, 1);
	if (conn_new(reactor, sv[0], proto) == NULL)
		abort();
	/* The first byte picks the segment size: split reads matter. */
	size_t seg = size > 0 ? (size_t)data[0] % 64 + 1 : 1;
	/* A session that stops reading (QUIT, held) ends the feeding. */
	for (int stuck = 0; off < size && stuck < 100;) {
		size_t n = size - off < seg ? size - off : seg;
		ssize_t w = send(sv[1], data + off, n, MSG_NOSIGNAL);

		if (w > 0) {
			off += (size_t)w;
			stuck = 0;
		} else {
			stuck++;
		}
		reactor_run_once(reactor, 0);
		drain(sv[1]);
	}
	shutdown(sv[1], SHUT_WR);
	for (int i = 0; i < 1000 && conn_count(reactor) > 0; i++) {
		reactor_run_once(reactor, 0);
		drain(sv[1]);
	}
	close(sv[1]);
	/* Whatever is left (held, paused) is closed now. */
	for (int i = 0; i < 10 && conn_count(reactor) > 0; i++)
		reactor_run_once(reactor, 0);
	if (conn_count(reactor) > 0) {
		conn_close_all(reactor);
	}
	if (conn_count(reactor) != 0 || atomic_load(&conn_live) != 0)
		abort();
}
