# tests/bench/bench.mk: the load generator and `make bench` (included by the Makefile).
.PHONY: bench bench-deps
