/* service.c: systemd notifications through libsystemd's sd_notify. */
#include "service.h"

#include <inttypes.h>
#include <systemd/sd-daemon.h>
#include <time.h>

void
service_ready(void)
{
	sd_notify(0, "READY=1");
}

void
service_reloading(void)
{
	struct timespec ts;
	uint64_t usec;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	usec = (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64, usec);
}

void
service_stopping(void)
{
	sd_notify(0, "STOPPING=1");
}

void
service_status(const char *text)
{
	sd_notifyf(0, "STATUS=%s", text);
}
