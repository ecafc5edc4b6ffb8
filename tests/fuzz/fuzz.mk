# tests/fuzz/fuzz.mk: libFuzzer targets (make fuzz) and their replay in make check.
#
# make fuzz FUZZ_SECONDS=60 builds every target with clang
# -fsanitize=fuzzer,address,undefined and runs each for that long on a copy
# of its seed corpus (tests/fuzz/corpus/<target>); crashes land in
# build/fuzz/crashes/. A crash found is kept in tests/fuzz/regress/<target>/
# and replayed, with the seeds, by `make check-fuzz-replay` (part of check).

FUZZ_TARGETS := router smpp_pdu smpp_session config cluster_wire metrics \
	text_decode text_join esme_session
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_DIR := build/fuzz
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-Isrc -Itests/fuzz $(OPT_CFLAGS) $(PKG_CFLAGS)
FUZZ_SRCS := $(filter-out src/main.c,$(SRCS)) tests/fuzz/session.c

.PHONY: fuzz fuzz-deps check-fuzz-replay

fuzz-deps:
	@command -v $(FUZZ_CC) >/dev/null && \
		echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' | \
		$(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null || \
	if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq clang libclang-rt-dev; \
	else \
		echo "fuzzing needs clang with libFuzzer: sudo apt-get install clang libclang-rt-dev"; \
		exit 1; \
	fi

# The sources are compiled once, with coverage (fuzzer-no-link) and the
# sanitizers, and each target links them with its own entry point and
# libFuzzer. $(BUILD)/.make-settings: the options and pkg-config's verdict
# (see the Makefile) reach these builds too.
FUZZ_OBJ_DIR := $(FUZZ_DIR)/obj
FUZZ_OBJS := $(FUZZ_SRCS:%.c=$(FUZZ_OBJ_DIR)/%.o)
FUZZ_OBJ_FLAGS := $(subst -fsanitize=fuzzer$(comma),-fsanitize=fuzzer-no-link$(comma),$(FUZZ_FLAGS))
# Two targets fuzz at a time on two CPUs: each still gets a CPU of its own.
FUZZ_JOBS ?= $(shell nproc)

$(FUZZ_OBJ_DIR)/%.o: %.c $(BUILD)/.make-settings
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ-CC $<")
	$(Q)$(FUZZ_CC) $(FUZZ_OBJ_FLAGS) -MMD -MP -c -o $@ $<

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJS) $(BUILD)/.make-settings
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ-LD $@")
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_OBJS) $(ER_LIBS)

-include $(FUZZ_OBJS:.o=.d)
# (Kept: make would take them for intermediates of the pattern rule.)
.SECONDARY: $(FUZZ_OBJS)

# Each target runs FUZZ_SECONDS on a scratch copy of its corpus, FUZZ_JOBS
# at a time, its output kept until it ends; the line "fuzz <target>: N
# executions" is the summary.
fuzz: deps fuzz-deps
	@$(MAKE) --no-print-directory -s -j$(FUZZ_JOBS) $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)
	@mkdir -p $(FUZZ_DIR)/crashes
	@$(MAKE) --no-print-directory -j$(FUZZ_JOBS) -O $(FUZZ_TARGETS:%=fuzz-run-%)

fuzz-run-%: FORCE
	@t=$*; work=$(FUZZ_DIR)/corpus-$$t; rm -rf $$work; mkdir -p $$work; \
	cp tests/fuzz/corpus/$$t/* $$work/; \
	[ -d tests/fuzz/regress/$$t ] && cp tests/fuzz/regress/$$t/* $$work/ || true; \
	echo "fuzz $$t: $(FUZZ_SECONDS) s"; \
	ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	./$(FUZZ_DIR)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
		-max_len=4096 -timeout=10 -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_DIR)/crashes/$$t- $$work \
		> $(FUZZ_DIR)/$$t.log 2>&1 || { tail -50 $(FUZZ_DIR)/$$t.log; \
		echo "fuzz $$t: FAILED (input in $(FUZZ_DIR)/crashes/)"; exit 1; }; \
	echo "fuzz $$t: $$(sed -n 's/^stat::number_of_executed_units: *//p' $(FUZZ_DIR)/$$t.log) executions, no crash"

# The seeds and every regression input, through the targets built with the
# project's compiler (and sanitizers, when SANITIZE is set): part of check.
$(BUILD)/fuzz-replay-%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/session.c $(LIB_OBJS) \
    $(BUILD)/.make-settings
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ER_CFLAGS) -Itests/fuzz -Isrc $(CFLAGS) $(ER_LDFLAGS) $(LDFLAGS) \
		-o $@ $< tests/fuzz/replay.c tests/fuzz/session.c $(LIB_OBJS) $(ER_LIBS)

check-fuzz-replay: $(FUZZ_TARGETS:%=$(BUILD)/fuzz-replay-%)
	@set -e; for t in $(FUZZ_TARGETS); do \
		printf 'fuzz replay %s: ' $$t; \
		$(BUILD)/fuzz-replay-$$t tests/fuzz/corpus/$$t tests/fuzz/regress/$$t; \
	done
