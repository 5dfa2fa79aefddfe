# Benchmarks: goro's programs under bench/, peers under bench/peers/.
include bench/peers/peers.mk
bench:
	@echo "bench: not wired yet"
