# tests/stress/stress.mk: make check-stress and make check-valgrind
# (included by the Makefile). See tests/stress/README.md.
.PHONY: check-stress check-valgrind

STRESS := $(BUILD)/stress
# Sanitizer builds use more memory per allocation: a looser RSS bound.
STRESS_ENV := $(if $(SANITIZE),STRESS_RSS_LIMIT_MB=1024)
VALGRIND ?= valgrind
VALGRIND_FLAGS := --leak-check=full --error-exitcode=1 \
	--errors-for-leak-kinds=definite --show-leak-kinds=definite \
	--track-origins=yes --num-callers=30

$(STRESS): tests/stress/stress.c $(BUILD)/.make-settings
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(ER_CFLAGS) $(CFLAGS) $(CPPFLAGS) $(ER_LDFLAGS) $(LDFLAGS) \
		-o $@ $< -pthread

# The hostile-client and fault scenarios (twelve), about 5 minutes in all.
check-stress: $(BIN) $(STRESS)
	$(Q)$(STRESS_ENV) ECHOROUTERD_BIN=$(BIN) STRESS_BIN=$(STRESS) \
		tests/stress/run-stress $(STRESS_SCENARIOS)

# The daemon under valgrind through a mixed workload, then through the TLS
# tests (tests/e2e/tls.test.js: every protocol behind TLS, client
# certificates, hostile handshakes, a certificate reload); needs a build
# without sanitizers. Installs valgrind with apt-get when root.
check-valgrind: $(BIN) $(STRESS) node-deps
	@if [ -n "$(SANITIZE)" ]; then \
		echo "check-valgrind: build without SANITIZE"; exit 1; fi
	@command -v $(VALGRIND) >/dev/null || \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq valgrind; \
	else \
		echo "valgrind missing; run: sudo apt-get install valgrind"; \
		exit 1; \
	fi
	$(Q)ECHOROUTERD_BIN=$(BIN) STRESS_BIN=$(STRESS) \
		STRESS_WRAP="$(VALGRIND) $(VALGRIND_FLAGS)" \
		tests/stress/run-stress valgrind
	$(Q)ECHOROUTERD_BIN=$(CURDIR)/$(BIN) \
		ECHOROUTERD_WRAP="$(VALGRIND) $(VALGRIND_FLAGS)" \
		node --test --test-concurrency=1 tests/e2e/tls.test.js

-include $(STRESS).d
