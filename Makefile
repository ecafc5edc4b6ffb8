# echorouterd: plain GNU make. `make help` lists the targets.

PREFIX      ?= /usr/local
SBINDIR     ?= $(PREFIX)/sbin
SYSCONFDIR  ?= /etc
MANDIR      ?= $(PREFIX)/share/man
DESTDIR     ?=

VERSION     := 0.1.0
CC          ?= cc
PKG_CONFIG  ?= pkg-config
# Where systemd looks for system units; asked of pkg-config once.
ifeq ($(origin UNITDIR),undefined)
UNITDIR := $(or $(shell $(PKG_CONFIG) --variable=systemdsystemunitdir systemd \
	2>/dev/null),/lib/systemd/system)
endif
SANITIZE    ?=

comma := ,
VARIANT := $(if $(SANITIZE),san-$(subst $(comma),-,$(SANITIZE)),default)
BUILD   ?= build/$(VARIANT)
BIN     := $(BUILD)/echorouterd

# Optional libraries: auto (the default) builds a feature in when
# pkg-config finds its library, yes requires it (the build fails, saying
# which, if it is missing), no leaves it out. A feature's modules are
# compiled only when it is in (% stands for any text:
# src/transport_tls.c, src/transport_tls_ktls.c, ...), and it is told to
# the code as ER_WITH_<NAME>=1 or 0.
WITH_SQLITE ?= auto
WITH_NATS   ?= auto
WITH_TLS    ?= auto
WITH_CURL   ?= auto
OPTIONS     := SQLITE NATS TLS CURL
SQLITE_PKG  := sqlite3
SQLITE_DEB  := libsqlite3-dev
SQLITE_SRCS := src/store_sqlite.c
NATS_PKG    := libnats
NATS_DEB    := libnats-dev
NATS_SRCS   := src/store_jetstream.c src/cluster.c src/cluster_kv.c \
	src/cluster_send.c src/cluster_receipt.c src/nats_link.c
TLS_PKG     := openssl
TLS_DEB     := libssl-dev
TLS_SRCS    := src/transport_tls%.c
CURL_PKG    := libcurl
CURL_DEB    := libcurl4-openssl-dev
CURL_SRCS   := src/http_out.c

$(foreach o,$(OPTIONS),$(if $(filter auto yes no,$(WITH_$o)),,\
	$(error WITH_$o=$(WITH_$o): use auto, yes or no)))
# $(call option_on,NAME): yes or no, what WITH_NAME comes to on this machine
# (auto asks pkg-config whether the library is there: a probe, not an error).
option_on = $(if $(filter auto,$(WITH_$1)),$(if $(shell \
	$(PKG_CONFIG) --exists $($1_PKG) 2>/dev/null && echo y),yes,no),$(WITH_$1))
$(foreach o,$(OPTIONS),$(eval $o_ON := $(call option_on,$o)))
OPTIONS_ON  := $(foreach o,$(OPTIONS),$(if $(filter yes,$($o_ON)),$o))
OPTIONS_OFF := $(filter-out $(OPTIONS_ON),$(OPTIONS))

BASE_PKGS := libconfig libsystemd liburing jansson
PKGS := $(BASE_PKGS) $(foreach o,$(OPTIONS_ON),$($o_PKG))
# What pkg-config says is missing, kept to be reported when something is
# compiled or linked (pkg_report), not here: make deps, help and clean need
# none of it, and on a fresh machine make run and make check install the
# libraries (deps) only after this file was read; their sub-make reads it
# again.
yes_missing = $(if $(shell $(PKG_CONFIG) --exists $($1_PKG) 2>/dev/null || \
	echo n),WITH_$1=yes but pkg-config finds no $($1_PKG) (Debian: $($1_DEB)).)
PKG_ERRORS := $(strip $(shell $(PKG_CONFIG) --print-errors --short-errors \
	--exists $(BASE_PKGS) 2>&1) $(foreach o,$(OPTIONS),\
	$(if $(filter yes,$(WITH_$o)),$(call yes_missing,$o))))
CHECK_ERRORS := $(shell $(PKG_CONFIG) --print-errors --short-errors \
	--exists check 2>&1)

# Project flags first; the user's CFLAGS/LDFLAGS come after so they add.
ER_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -pthread -MMD -MP \
	-DVERSION='"$(VERSION)"'
ifeq ($(CI),true)
ER_CFLAGS += -Werror
endif
ifneq ($(SANITIZE),)
# Leaks in libraries we use, not ours (see the file).
export LSAN_OPTIONS ?= suppressions=$(CURDIR)/tests/lsan.supp
ER_CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -O1
ER_LDFLAGS += -fsanitize=$(SANITIZE)
endif
# Failures here are in PKG_ERRORS; the flags are then simply incomplete.
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
# What -V and the start-up line name (liburing 2.3 has no version macros).
OPT_CFLAGS := $(foreach o,$(OPTIONS),-DER_WITH_$o=$(if \
	$(filter yes,$($o_ON)),1,0)) -DER_LIBURING_VERSION='"$(shell \
	$(PKG_CONFIG) --modversion liburing 2>/dev/null)"'
ER_CFLAGS += $(OPT_CFLAGS) $(PKG_CFLAGS)
ER_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -pthread
CHECK_CFLAGS := $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS := $(shell $(PKG_CONFIG) --libs check 2>/dev/null)

# '$1' for the shell, whatever quotes it holds.
sq = '$(subst ','\'',$(strip $1))'
# $(call pkg_report,ERRORS): a recipe line that fails with pkg-config's
# words and the way out when ERRORS is not empty; nothing otherwise.
pkg_report = $(if $(strip $1),@printf '%s\n' $(call sq,pkg-config: $1) \
	$(call sq,make deps (as root) installs what the build needs: $(DEB_DEPS)) \
	>&2; exit 1)

# Everything that decides what the compiler makes. $(BUILD)/.make-settings
# holds it, rewritten only when it changes, and every object depends on
# it: a new CFLAGS or WITH_... rebuilds, where make once said "Nothing to
# be done".
SETTINGS := $(foreach v,CC ER_CFLAGS CFLAGS CPPFLAGS ER_LDFLAGS LDFLAGS \
	ER_LIBS CHECK_CFLAGS CHECK_LIBS,$(call sq,$v = $($v))) \
	$(foreach o,$(OPTIONS),$(call sq,WITH_$o = $(WITH_$o): $($o_ON)))

# The modules of the options that are off are left out.
SRCS := $(filter-out $(foreach o,$(OPTIONS_OFF),$($o_SRCS)),\
	$(wildcard src/*.c))
OBJS := $(SRCS:src/%.c=$(BUILD)/src/%.o)
LIB_OBJS := $(filter-out $(BUILD)/src/main.o,$(OBJS))
UNIT_SRCS := $(wildcard tests/unit/*.c)
UNIT_OBJS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%.o)
INTEG_SRCS := $(wildcard tests/integ/*.c)
INTEG_OBJS := $(INTEG_SRCS:tests/integ/%.c=$(BUILD)/tests/integ/%.o)

ifeq ($(V),1)
Q :=
else
Q := @
endif

# Debian packages the build and the tests need, with the libraries of the
# options not set to no (kannel: a real SMS gateway the e2e tests bind).
DEB_DEPS := build-essential pkg-config libconfig-dev libsystemd-dev \
	libjansson-dev \
	liburing-dev check mandoc man-db netcat-openbsd systemd \
	$(foreach o,$(OPTIONS),$(if $(filter no,$(WITH_$o)),,$($o_DEB))) \
	$(if $(filter no,$(WITH_NATS)),,nats-server) prometheus kannel \
	$(if $(filter no,$(WITH_TLS)),,openssl)
# What `make check-system` adds (it installs them itself when root).
SYSTEM_DEPS := systemd-container debootstrap

MANPAGES := man/echorouterd.8 man/echorouterd.conf.5
SOCKET_UNITS := $(wildcard systemd/*.socket)
# The installed units name the installed binary and configuration.
UNIT_SED := -e 's|/usr/local/sbin/echorouterd|$(SBINDIR)/echorouterd|g' \
	-e 's|/etc/echorouterd/|$(SYSCONFDIR)/echorouterd/|g'

# The installed configuration keeps its store where the unit's
# StateDirectory= is (the sample's is in the checkout, for make run);
# built without SQLite, its store group is commented out, since such a
# build refuses one.
STORE_PATH := /var/lib/echorouterd/store.db
CONF_SED := -e 's|^\(  path = \)"store.db";|\1"$(STORE_PATH)";|' \
	$(if $(filter yes,$(SQLITE_ON)),,-e '/^store = {/,/^};/s/^/\# /')

.PHONY: all run check check-unit check-integ check-e2e check-smpp check-dist \
	check-build check-system check-cycles check-layers lint deps \
	node-deps clean install uninstall \
	help FORCE

all: $(BIN)

help:
	@echo "make            build $(BIN)"
	@echo "make run        install missing build deps, build, run on conf/echorouterd.conf"
	@echo "make check      install missing deps, build, run every test"
	@echo "make check SANITIZE=address,undefined   (or SANITIZE=thread)"
	@echo "make check-e2e  the end-to-end tests alone (tests/e2e/, Node.js;"
	@echo "                check-smpp is the same)"
	@echo "make lint       mandoc -Tlint on the man pages, systemd-analyze"
	@echo "                verify and security on the units"
	@echo "make install    PREFIX=$(PREFIX) SBINDIR=$(SBINDIR)"
	@echo "                SYSCONFDIR=$(SYSCONFDIR) MANDIR=$(MANDIR)"
	@echo "                UNITDIR=$(UNITDIR), all under DESTDIR"
	@echo "make uninstall  removes what install put there but the config"
	@echo "make check-system  (root) boots systemd in a container and"
	@echo "                tests the installed service end to end"
	@echo "make clean"
	@echo "Build options: auto (on if pkg-config finds the library, the"
	@echo "default), yes (required: the build fails without it) or no:"
	@echo "  WITH_SQLITE=$(WITH_SQLITE) ($(SQLITE_ON) here): the SQLite store"
	@echo "                 ($(SQLITE_DEB))"
	@echo "  WITH_NATS=$(WITH_NATS) ($(NATS_ON) here): the NATS cluster and the"
	@echo "                 JetStream store ($(NATS_DEB))"
	@echo "  WITH_TLS=$(WITH_TLS) ($(TLS_ON) here): TLS listeners, OpenSSL 3"
	@echo "                 ($(TLS_DEB))"
	@echo "  WITH_CURL=$(WITH_CURL) ($(CURL_ON) here): receipts and messages"
	@echo "                 posted to HTTP applications ($(CURL_DEB))"
	@echo "Flags and options are kept in $(BUILD)/.make-settings: changing"
	@echo "CC, CFLAGS, CPPFLAGS, LDFLAGS or an option rebuilds."

# Always visited, so that pkg-config's complaints stop any build; the file
# itself changes only with the settings.
$(BUILD)/.make-settings: FORCE
	$(call pkg_report,$(PKG_ERRORS))
	@mkdir -p $(@D)
	@printf '%s\n' $(SETTINGS) >$@.new
	@if cmp -s $@.new $@; then rm -f $@.new; else \
		$(if $(Q),echo "  SET     $@";) mv -f $@.new $@; fi

FORCE:

$(BUILD)/src/%.o: src/%.c $(BUILD)/.make-settings
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ER_CFLAGS) $(CFLAGS) $(CPPFLAGS) -c -o $@ $<

$(BUILD)/tests/%.o: tests/%.c $(BUILD)/.make-settings
	$(call pkg_report,$(CHECK_ERRORS))
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ER_CFLAGS) $(CHECK_CFLAGS) -Isrc -Itests $(CFLAGS) \
		$(CPPFLAGS) -c -o $@ $<

$(BIN): $(OBJS)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ER_LDFLAGS) $(LDFLAGS) -o $@ $^ $(ER_LIBS)

$(BUILD)/unit-tests: $(UNIT_OBJS) $(LIB_OBJS)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ER_LDFLAGS) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(ER_LIBS)

$(BUILD)/integ-tests: $(INTEG_OBJS) $(LIB_OBJS)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ER_LDFLAGS) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(ER_LIBS)

# Installs what is missing with apt-get when root; otherwise says how.
deps:
	@missing=""; for p in $(DEB_DEPS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | \
			grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing:$$missing"; \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else \
		echo "missing build dependencies; run:"; \
		echo "  sudo apt-get install$$missing"; exit 1; \
	fi

run: deps
	@$(MAKE) --no-print-directory all
	./$(BIN) -c conf/echorouterd.conf

check: deps node-deps
	@$(MAKE) --no-print-directory check-unit check-integ check-e2e \
		check-bench check-fuzz-replay check-dist check-build

# The end-to-end tests (SMPP interop, cluster, metrics, TLS, store) drive
# the daemon from Node.js, SMPP with the npm smpp package, pinned in
# tests/e2e/package-lock.json.
node-deps:
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq nodejs npm; \
		else \
			echo "the end-to-end tests need Node.js: sudo apt-get install nodejs npm"; \
			exit 1; \
		fi; \
	fi
	@if [ ! -d tests/e2e/node_modules/smpp ] || \
	    [ tests/e2e/package-lock.json -nt tests/e2e/node_modules/.package-lock.json ]; then \
		cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error; \
	fi

# Two test files at a time (E2E_JOBS): most of their time is spent
# waiting (back-offs, timeouts, restarts), and each starts its own daemons
# and servers on ports of its own.
E2E_JOBS ?= 2
check-e2e: $(BIN)
	ECHOROUTERD_BIN=$(CURDIR)/$(BIN) ECHOROUTERD_SANITIZE=$(SANITIZE) \
	    node --test --test-concurrency=$(E2E_JOBS) tests/e2e/

# The name these tests had when they were only SMPP's.
check-smpp: check-e2e

check-unit: $(BUILD)/unit-tests
	ECHOROUTERD_SRCDIR=$(CURDIR) $(BUILD)/unit-tests

check-integ: $(BIN) $(BUILD)/integ-tests
	ECHOROUTERD_BIN=$(BIN) $(BUILD)/integ-tests

# Units, man pages and the install layout (part of make check).
check-dist: $(BIN)
	$(Q)MAKE="$(MAKE)" BUILD="$(BUILD)" BIN="$(BIN)" \
		tests/system/check-dist.sh

# No call cycle joins delivery, the message, the store and its backends,
# the cluster and receipts in the objects built; the core, the protocols
# and the configuration include only their layers' headers (both part of
# make check, in check-dist).
check-cycles: $(BIN)
	$(Q)tests/system/check-cycles.sh $(BUILD)

check-layers:
	$(Q)tests/system/check-layers.sh

# The build options and the settings that rebuild (part of make check):
# builds with every option off, at -O0, into $(BUILD)/check-build.
check-build: $(BIN)
	$(Q)MAKE="$(MAKE)" BUILD="$(BUILD)" BIN="$(BIN)" \
		tests/system/check-build.sh

# systemd-analyze verify checks the unit's ExecStart: the binary must exist.
lint: $(BIN)
	mandoc -Tlint -Wwarning $(MANPAGES)
	$(Q)MAKE="$(MAKE)" BUILD="$(BUILD)" BIN="$(BIN)" \
		tests/system/check-dist.sh --units-only

# End to end under a real systemd (root; not part of make check).
check-system: deps node-deps $(BIN)
	$(Q)SYSTEM_DEPS="$(SYSTEM_DEPS)" MAKE="$(MAKE)" BUILD="$(BUILD)" \
		BIN="$(BIN)" tests/system/check-system.sh

install: $(BIN)
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(SYSCONFDIR)/echorouterd
	install -m 0755 $(BIN) $(DESTDIR)$(SBINDIR)/echorouterd
	install -m 0644 man/echorouterd.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 man/echorouterd.conf.5 $(DESTDIR)$(MANDIR)/man5/
	sed $(UNIT_SED) systemd/echorouterd.service \
		>$(DESTDIR)$(UNITDIR)/echorouterd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/echorouterd.service
	install -m 0644 $(SOCKET_UNITS) $(DESTDIR)$(UNITDIR)/
	@conf=$(DESTDIR)$(SYSCONFDIR)/echorouterd/echorouterd.conf; \
	if [ -e "$$conf" ]; then \
		echo "keeping the existing $$conf"; \
	else \
		echo "install -m 0644 conf/echorouterd.conf $$conf"; \
		sed $(CONF_SED) conf/echorouterd.conf >"$$conf" && \
		chmod 0644 "$$conf"; \
	fi
	@if [ -z "$(DESTDIR)" ]; then \
		echo "now: systemctl daemon-reload && systemctl enable --now" \
			"echorouterd.service (or echorouterd.socket)"; fi

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/echorouterd \
		$(DESTDIR)$(MANDIR)/man8/echorouterd.8 \
		$(DESTDIR)$(MANDIR)/man5/echorouterd.conf.5 \
		$(DESTDIR)$(UNITDIR)/echorouterd.service \
		$(SOCKET_UNITS:systemd/%=$(DESTDIR)$(UNITDIR)/%)
	@echo "kept $(DESTDIR)$(SYSCONFDIR)/echorouterd/ (remove it by hand)"

clean:
	rm -rf build

# make bench, bench-deps and the load generator live with the benchmark;
# make fuzz and the replay of its corpora with the fuzz targets.
include tests/bench/bench.mk
include tests/fuzz/fuzz.mk
# make check-stress (hostile clients, faults) and make check-valgrind.
include tests/stress/stress.mk

-include $(OBJS:.o=.d) $(UNIT_OBJS:.o=.d) $(INTEG_OBJS:.o=.d)
