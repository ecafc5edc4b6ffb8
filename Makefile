# echorouterd: plain GNU make. `make help` lists the targets.

PREFIX      ?= /usr/local
SBINDIR     ?= $(PREFIX)/sbin
SYSCONFDIR  ?= /etc
MANDIR      ?= $(PREFIX)/share/man
DESTDIR     ?=

VERSION     := 0.1.0
CC          ?= cc
PKG_CONFIG  ?= pkg-config
SANITIZE    ?=

comma := ,
VARIANT := $(if $(SANITIZE),san-$(subst $(comma),-,$(SANITIZE)),default)
BUILD   ?= build/$(VARIANT)
BIN     := $(BUILD)/echorouterd

PKGS := libconfig libsystemd
# Project flags first; the user's CFLAGS/LDFLAGS come after so they add.
ER_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -pthread -MMD -MP \
	-DVERSION='"$(VERSION)"'
ifeq ($(CI),true)
ER_CFLAGS += -Werror
endif
ifneq ($(SANITIZE),)
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
DEB_DEPS := build-essential pkg-config libconfig-dev libsystemd-dev check \
	mandoc netcat-openbsd systemd

.PHONY: all run check check-unit check-integ deps clean install uninstall help

all: $(BIN)

help:
	@echo "make            build $(BIN)"
	@echo "make run        install missing build deps, build, run on conf/echorouterd.conf"
	@echo "make check      install missing deps, build, run every test"
	@echo "make check SANITIZE=address,undefined   (or SANITIZE=thread)"
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

check: deps
	@$(MAKE) --no-print-directory check-unit check-integ

check-unit: $(BUILD)/unit-tests
	$(BUILD)/unit-tests

check-integ: $(BIN) $(BUILD)/integ-tests
	ECHOROUTERD_BIN=$(BIN) $(BUILD)/integ-tests

clean:
	rm -rf build

# make bench, bench-deps and the load generator live with the benchmark.
include tests/bench/bench.mk

-include $(OBJS:.o=.d) $(UNIT_OBJS:.o=.d) $(INTEG_OBJS:.o=.d)
