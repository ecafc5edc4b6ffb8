/* service.c: service threads: a mailbox, a loop that drains it, start and stop. */
#include "service.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"
#include "util.h"

struct service {
	/* Any thread. */
	struct mailbox mb;
	/* Set before the thread starts, read-only after. */
	char	name[16];
	const struct service_hooks *h;
	void	*arg;
	/* The thread that made it. */
	pthread_t thread;
	bool	started;	/* not for the service's own thread to read */
	/* Its own thread. */
	bool	stopping;
	struct mailbox_task stop_task;
};

/*
 * The service whose thread this is, set by that thread first thing: its
 * own tasks and hooks may run before service_start has returned.
 */
static _Thread_local const struct service *service_self;

struct service *
service_new(const char *name, const struct service_hooks *h, void *arg)
{
	struct service *s = xcalloc(1, sizeof(*s));

	snprintf(s->name, sizeof(s->name), "%s", name);
	s->h = h;
	s->arg = arg;
	if (mailbox_init(&s->mb) < 0) {
		int saved = errno;

		free(s);
		errno = saved;
		return NULL;
	}
	return s;
}

const char *
service_name(const struct service *s)
{
	return s->name;
}

bool
service_is_current(const struct service *s)
{
	return s != NULL && service_self == s;
}

void
service_post(struct service *s, struct mailbox_task *t)
{
	mailbox_post(&s->mb, t);
}

void
service_post_fn(struct service *s, mailbox_task_fn *fn, void *arg)
{
	mailbox_post_fn(&s->mb, fn, arg);
}

void
service_post_chain(struct service *s, struct mailbox_task *head,
    struct mailbox_task *tail)
{
	mailbox_push(&s->mb, head, tail);
}

/* The last task before the stop: everything posted earlier has run. */
static void
service_stop_task(void *owner, void *arg, enum mailbox_status st)
{
	struct service *s = owner;

	(void)arg;
	(void)st;
	s->stopping = true;
}

/* Runs what the mailbox holds until the stop task has run. */
static void
service_run_batch(struct service *s)
{
	if (mailbox_drain(&s->mb, s, MAILBOX_RUN) > 0 &&
	    s->h->after_batch != NULL)
		s->h->after_batch(s, s->arg);
}


/*
 * The poll timeout until the next tick is due, running it when it is:
 * a busy mailbox does not put the tick off.
 */
static int
service_tick_due(struct service *s, uint64_t *next)
{
	uint64_t now;

	if (s->h->tick == NULL || s->h->tick_ms == 0)
		return -1;
	if ((now = mono_ms()) >= *next) {
		s->h->tick(s, s->arg);
		*next = now + s->h->tick_ms;
		return (int)s->h->tick_ms;
	}
	return (int)(*next - now);
}

static void *
service_main(void *arg)
{
	struct service *s = arg;
	struct pollfd pfd = { .fd = mailbox_fd(&s->mb), .events = POLLIN };
	uint64_t next_tick = mono_ms() + s->h->tick_ms;

	/* Named before any hook or task runs: they may look. */
	service_self = s;
	pthread_setname_np(pthread_self(), s->name);
	if (s->h->start != NULL)
		s->h->start(s, s->arg);
	log_debug("service=%s running", s->name);
	while (!s->stopping) {
		int n = poll(&pfd, 1, service_tick_due(s, &next_tick));

		if (n < 0 && errno != EINTR)
			fatal("service=%s poll", s->name);
		if (n > 0)
			service_run_batch(s);
	}
	if (s->h->stop != NULL)
		s->h->stop(s, s->arg);
	log_debug("service=%s stopped", s->name);
	return NULL;
}

unsigned
service_run_within(struct service *s, unsigned us)
{
	struct pollfd pfd = { .fd = mailbox_fd(&s->mb), .events = POLLIN };
	struct timespec ts = { .tv_sec = us / 1000000,
	    .tv_nsec = (long)(us % 1000000) * 1000 };

	if (s->stopping || ppoll(&pfd, 1, &ts, NULL) <= 0)
		return 0;
	return mailbox_drain(&s->mb, s, MAILBOX_RUN);
}

int
service_start(struct service *s)
{
	int err;

	if ((err = pthread_create(&s->thread, NULL, service_main, s)) != 0) {
		errno = err;
		return -1;
	}
	s->started = true;
	return 0;
}

void
service_stop(struct service *s)
{
	if (!s->started)
		return;
	s->stop_task.fn = service_stop_task;
	s->stop_task.arg = NULL;
	service_post(s, &s->stop_task);
	pthread_join(s->thread, NULL);
	s->started = false;
}

void
service_free(struct service *s)
{
	if (s == NULL)
		return;
	service_stop(s);
	mailbox_fini(&s->mb, s);
	free(s);
}
