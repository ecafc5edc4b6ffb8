/*
 * service.h: a service thread: a named thread that other threads post
 * tasks to, and that owns whatever its hooks set up (the store, the NATS
 * bridge). It drains its mailbox in batches, and stops once it has run
 * everything posted before the stop.
 */
#ifndef ECHOROUTERD_SERVICE_H
#define ECHOROUTERD_SERVICE_H

#include <stdbool.h>

#include "mailbox.h"

struct service;

/*
 * What a service does besides running tasks; every hook runs on the
 * service's own thread, any may be NULL, arg is the one given to
 * service_new.
 */
struct service_hooks {
	void	(*start)(struct service *s, void *arg);	/* before any task */
	/* After each batch of tasks: a group commit goes here. */
	void	(*after_batch)(struct service *s, void *arg);
	void	(*tick)(struct service *s, void *arg);	/* every tick_ms */
	void	(*stop)(struct service *s, void *arg);	/* after the last task */
	unsigned tick_ms;				/* 0: no tick */
};

/*
 * A service named name (at most 15 bytes, the thread's name), not yet
 * running; hooks and arg are borrowed for its life. NULL with errno set
 * if its mailbox cannot be made. Any thread, before posting to it.
 */
struct service *service_new(const char *name, const struct service_hooks *h,
	    void *arg);

/*
 * Waits up to us microseconds for tasks and runs those there are then
 * (not the after_batch hook): the number run, 0 when none came. On s's
 * thread, from a hook, to gather work for one costly step.
 */
unsigned service_run_within(struct service *s, unsigned us);

/* Starts the thread. 0, or -1 with errno. The thread that made s. */
int	service_start(struct service *s);

/*
 * Queues t to run on the service's thread: fn(s, arg, MAILBOX_RUN) in the
 * order this thread posted, or fn(s, arg, MAILBOX_CANCELLED) from
 * service_free if the thread had ended (or never ran). Any thread.
 */
void	service_post(struct service *s, struct mailbox_task *t);
void	service_post_fn(struct service *s, mailbox_task_fn *fn, void *arg);
/* Queues the chain head..tail (newest first) in one push. Any thread. */
void	service_post_chain(struct service *s, struct mailbox_task *head,
	    struct mailbox_task *tail);

/*
 * Asks the thread to run what was posted before this call, then its stop
 * hook, and end; waits for it. Tasks posted once it has ended are
 * cancelled by service_free. The thread that started s.
 */
void	service_stop(struct service *s);

/*
 * Frees a stopped or never started service, running what is still queued
 * as cancelled. NULL is a no-op. The thread that made s.
 */
void	service_free(struct service *s);

/* Its name, and whether the calling thread is its thread. Any thread. */
const char *service_name(const struct service *s);
bool	service_is_current(const struct service *s);

#endif
