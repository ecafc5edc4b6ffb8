# tests/bench/bench.mk: the load generator and `make bench` (included by the Makefile).
.PHONY: bench bench-run bench-deps check-bench storebench bench-scale bench-split

LOADGEN    := $(BUILD)/loadgen
# The yardsticks make bench compares against, and the plotter.
BENCH_DEBS := redis-server memcached nats-server nginx gnuplot-nox
LOADGEN_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -pthread

# With TLS built, the generator speaks it too (-Y), through the same OpenSSL.
LOADGEN_TLS := $(if $(filter yes,$(TLS_ON)),-DLG_TLS=1,-DLG_TLS=0)
LOADGEN_TLS_LIBS := $(if $(filter yes,$(TLS_ON)),$(shell $(PKG_CONFIG) --libs openssl 2>/dev/null))

$(LOADGEN): tests/bench/loadgen.c src/util.c src/util.h $(BUILD)/.make-settings
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(LOADGEN_CFLAGS) $(LOADGEN_TLS) -Isrc $(CFLAGS) $(CPPFLAGS) \
	    $(LDFLAGS) -o $@ tests/bench/loadgen.c src/util.c -lm \
	    $(LOADGEN_TLS_LIBS)

# The store's drain client (make bench's store rows).
DRAIN := $(BUILD)/drain
$(DRAIN): tests/bench/drain.c $(BUILD)/.make-settings
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(LOADGEN_CFLAGS) $(CFLAGS) $(CPPFLAGS) $(LDFLAGS) -o $@ \
	    tests/bench/drain.c

# The store's row schemas measured on SQLite alone, without the daemon
# (docs/testing.md, "Store schema measurements"): a few minutes with the
# default 200,000 messages; never part of make check. STOREBENCH_N sets the
# messages, STOREBENCH_ARGS the rest (storebench -h).
STOREBENCH := $(BUILD)/storebench
STOREBENCH_N ?= 200000
# LMDB (schemas l and m) only where liblmdb-dev is installed: the daemon
# does not use it, so it is no build dependency; storebench says it skipped.
STOREBENCH_LMDB := $(shell $(PKG_CONFIG) --exists lmdb 2>/dev/null && echo yes)
$(STOREBENCH): tests/bench/storebench.c $(BUILD)/.make-settings
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(LOADGEN_CFLAGS) $(CFLAGS) $(CPPFLAGS) $(LDFLAGS) -o $@ \
	    $(if $(STOREBENCH_LMDB),-DSB_LMDB=1) tests/bench/storebench.c \
	    $(shell $(PKG_CONFIG) --cflags --libs $(SQLITE_PKG) 2>/dev/null) \
	    $(if $(STOREBENCH_LMDB),$(shell $(PKG_CONFIG) --cflags --libs lmdb))

storebench: $(STOREBENCH)
	$(STOREBENCH) -n $(STOREBENCH_N) $(STOREBENCH_ARGS)

# How the store's accept and drain scale with shards, against redis AOF
# always (tests/bench/scale-store, about two minutes): meant for a machine
# with 16 CPUs or more; on fewer it is a try of the script, not a figure.
bench-scale: $(BIN) $(LOADGEN) $(DRAIN)
	ERD=$(CURDIR)/$(BIN) LG=$(CURDIR)/$(LOADGEN) DRAIN=$(CURDIR)/$(DRAIN) \
	    tests/bench/scale-store

# make bench's upstream rows with the SMS centre's side (a second
# echorouterd) on CPUs of its own, as a centre is another machine
# (tests/bench/split-upstream, about a minute): meant for a machine with
# 16 CPUs or more; on fewer it is a try of the script, not a figure.
bench-split: $(BIN) $(LOADGEN)
	ERD=$(CURDIR)/$(BIN) LG=$(CURDIR)/$(LOADGEN) tests/bench/split-upstream

# The generator against the real daemon, and against fake servers that
# corrupt, reorder or lose messages: it must fail those runs, in bounded
# time (part of make check; a few seconds per run).
check-bench: $(BIN) $(LOADGEN)
	ECHOROUTERD_BIN=$(CURDIR)/$(BIN) LOADGEN=$(CURDIR)/$(LOADGEN) \
	    node --test --test-concurrency=1 tests/bench/

# Installs the yardsticks with apt-get when root; otherwise says how.
bench-deps:
	@missing=""; for p in $(BENCH_DEBS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | \
			grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "bench-deps: all installed"; exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing:$$missing"; \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else \
		echo "missing benchmark yardsticks; run:"; \
		echo "  sudo apt-get install$$missing"; \
	fi

# The whole suite: about 10 minutes (3 interleaved rounds per cell).
# BENCH_QUICK=1 for a short smoke run. BENCH_BASELINE=/path/echorouterd
# (from the environment or the make command line) also runs every
# echorouterd cell on that binary, in the same rounds (tests/bench/README.md).
# Build dependencies first, like check; the yardsticks are bench-deps.
bench: deps
	@$(MAKE) --no-print-directory bench-run

bench-run: $(BIN) $(LOADGEN) $(DRAIN)
	ECHOROUTERD_BIN=$(BIN) LOADGEN=$(LOADGEN) DRAIN=$(DRAIN) \
	    $(if $(BENCH_BASELINE),BENCH_BASELINE=$(abspath $(BENCH_BASELINE))) \
	    tests/bench/run-bench
