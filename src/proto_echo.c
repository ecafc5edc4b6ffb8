/* proto_echo.c: the echo protocol: every byte comes back, in order, exactly once. */
#include "conn.h"
#include "counter.h"
#include "proto.h"

/* Echo has no messages of its own: whatever has arrived is one. */
static ssize_t
echo_frame_len(const uint8_t *p, size_t n, const struct limits *lim)
{
	(void)p;
	(void)lim;
	return (ssize_t)n;
}

static int
echo_on_message(struct conn *c, const uint8_t *msg, size_t len)
{
	/* One message per read: answer it straight from the read buffer. */
	conn_reply(c, msg, len);
	return 0;
}

const struct proto proto_echo = {
	.name = "echo",
	.frame_len = echo_frame_len,
	.on_message = echo_on_message,
	.messages_counter = COUNTER_MSG_ECHO,
};
