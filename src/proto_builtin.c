/* proto_builtin.c: the protocols built into the daemon, registered at start. */
#include "proto.h"

void
proto_builtin_register(void)
{
	/* In this order in proto_names (the configuration's errors). */
	proto_register(&proto_echo);
	proto_register(&proto_router);
	proto_register(&proto_smpp);
	proto_register(&proto_metrics);
	proto_register(&proto_http);
}
