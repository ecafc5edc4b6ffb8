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

PKGS := libconfig libsystemd liburing
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
ER_CFLAGS += $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
ER_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -pthread
CHECK_CFLAGS := $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS := $(shell $(PKG_CONFIG) --libs check 2>/dev/null)

SRCS := $(wildcard src/*.c)
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

# Debian packages the build and the tests need.
DEB_DEPS := build-essential pkg-config libconfig-dev libsystemd-dev liburing-dev \
	check mandoc man-db netcat-openbsd systemd
# What `make check-system` adds (it installs them itself when root).
SYSTEM_DEPS := systemd-container debootstrap

MANPAGES := man/echorouterd.8 man/echorouterd.conf.5
SOCKET_UNITS := $(wildcard systemd/*.socket)
# The installed units name the installed binary and configuration.
UNIT_SED := -e 's|/usr/local/sbin/echorouterd|$(SBINDIR)/echorouterd|g' \
	-e 's|/etc/echorouterd/|$(SYSCONFDIR)/echorouterd/|g'

.PHONY: all run check check-unit check-integ check-smpp check-dist \
	check-system lint deps node-deps clean install uninstall help

all: $(BIN)

help:
	@echo "make            build $(BIN)"
	@echo "make run        install missing build deps, build, run on conf/echorouterd.conf"
	@echo "make check      install missing deps, build, run every test"
	@echo "make check SANITIZE=address,undefined   (or SANITIZE=thread)"
	@echo "make lint       mandoc -Tlint on the man pages, systemd-analyze"
	@echo "                verify and security on the units"
	@echo "make install    PREFIX=$(PREFIX) SBINDIR=$(SBINDIR)"
	@echo "                SYSCONFDIR=$(SYSCONFDIR) MANDIR=$(MANDIR)"
	@echo "                UNITDIR=$(UNITDIR), all under DESTDIR"
	@echo "make uninstall  removes what install put there but the config"
	@echo "make check-system  (root) boots systemd in a container and"
	@echo "                tests the installed service end to end"
	@echo "make clean"

$(BUILD)/src/%.o: src/%.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ER_CFLAGS) $(CFLAGS) $(CPPFLAGS) -c -o $@ $<

$(BUILD)/tests/%.o: tests/%.c
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
	@$(MAKE) --no-print-directory check-unit check-integ check-smpp \
		check-bench check-fuzz-replay check-dist

# The SMPP interop tests drive the daemon with the npm smpp package, pinned
# in tests/smpp/package-lock.json.
node-deps:
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq nodejs npm; \
		else \
			echo "the SMPP tests need Node.js: sudo apt-get install nodejs npm"; \
			exit 1; \
		fi; \
	fi
	@if [ ! -d tests/smpp/node_modules/smpp ] || \
	    [ tests/smpp/package-lock.json -nt tests/smpp/node_modules/.package-lock.json ]; then \
		cd tests/smpp && npm ci --no-audit --no-fund --loglevel=error; \
	fi

check-smpp: $(BIN)
	ECHOROUTERD_BIN=$(CURDIR)/$(BIN) node --test --test-concurrency=1 tests/smpp/

check-unit: $(BUILD)/unit-tests
	$(BUILD)/unit-tests

check-integ: $(BIN) $(BUILD)/integ-tests
	ECHOROUTERD_BIN=$(BIN) $(BUILD)/integ-tests

# Units, man pages and the install layout (part of make check).
check-dist: $(BIN)
	$(Q)MAKE="$(MAKE)" BUILD="$(BUILD)" BIN="$(BIN)" \
		tests/system/check-dist.sh

lint:
	mandoc -Tlint -Wwarning $(MANPAGES)
	$(Q)MAKE="$(MAKE)" BUILD="$(BUILD)" BIN="$(BIN)" \
		tests/system/check-dist.sh --units-only

# End to end under a real systemd (root; not part of make check).
check-system: deps $(BIN)
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
		install -m 0644 conf/echorouterd.conf "$$conf"; \
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
