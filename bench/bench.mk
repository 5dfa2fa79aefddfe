# bench/bench.mk - goro's benchmark programs (bench/*.c) and the peers they
# are compared with (bench/peers/). Included by the top-level Makefile, which
# defines BUILD, CC, ALL_CFLAGS, ALL_LDFLAGS, LIBS, STATIC_LIB and HEADERS.
#
#   make bench       installs the bench packages (tools/deps.sh bench),
#                    builds every benchmark and peer, runs bench/run.sh
#                    $(BUILD), which ends with the echo servers (bench/echo.sh)
#                    and the static file servers (bench/httpd.sh)
#   make bench-plot  draws $(BUILD)/bench/echo.csv (written by bench/echo.sh)
#                    into docs/img/echo.svg
#

BENCH_OUT := $(BUILD)/bench
BENCH_NAMES := switch yield spawn forkjoin chan_pingpong skynet parked sleep preempt timers group \
               pipeline future accept local inherit deadline file_pread
BENCH_BINS := $(addprefix $(BENCH_OUT)/,$(BENCH_NAMES))
BENCH_OBJS := $(addsuffix .o,$(BENCH_BINS))

include bench/peers/peers.mk

# switch.c uses the internal context layout (arch/$(ARCH)/ctx_layout.h): the
# -Iarch/$(ARCH) -Iruntime in ALL_CFLAGS cover it.
$(BENCH_OBJS): $(BENCH_OUT)/%.o: bench/%.c bench/bench.h $(HEADERS) $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BENCH_BINS): $(BENCH_OUT)/%: $(BENCH_OUT)/%.o $(STATIC_LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)

# The price of priority classes: yield, spawn and ping-pong linked against a
# library built without them (GORO_NO_PRIORITIES, runtime/internal.h), run
# by bench/run.sh next to the same programs on the real one.
NOPRIO_DIR := $(BENCH_OUT)/noprio
NOPRIO_LIB := $(NOPRIO_DIR)/libgoro.a
NOPRIO_BINS := $(addprefix $(NOPRIO_DIR)/,yield spawn chan_pingpong)

$(NOPRIO_LIB): $(LIB_SRCS) $(ARCH_SRCS) $(HEADERS) Makefile
	$(Q)$(MAKE) --no-print-directory BUILD=$(NOPRIO_DIR) \
	    CFLAGS="$(CFLAGS) -DGORO_NO_PRIORITIES" $(NOPRIO_LIB)

$(NOPRIO_BINS): $(NOPRIO_DIR)/%: $(BENCH_OUT)/%.o $(NOPRIO_LIB)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(NOPRIO_LIB) $(LIBS)

# The price of the execution trace's recording points while no trace runs:
# the same programs linked against a library built without them
# (GORO_NO_TRACE, runtime/debug/debug.h); bench/run.sh also runs skynet
# traced (GORO_TRACE=/dev/null) for the price of a trace that runs.
NOTRACE_DIR := $(BENCH_OUT)/notrace
NOTRACE_LIB := $(NOTRACE_DIR)/libgoro.a
NOTRACE_BINS := $(addprefix $(NOTRACE_DIR)/,yield spawn chan_pingpong skynet)

$(NOTRACE_LIB): $(LIB_SRCS) $(ARCH_SRCS) $(HEADERS) Makefile
	$(Q)$(MAKE) --no-print-directory BUILD=$(NOTRACE_DIR) \
	    CFLAGS="$(CFLAGS) -DGORO_NO_TRACE" $(NOTRACE_LIB)

$(NOTRACE_BINS): $(NOTRACE_DIR)/%: $(BENCH_OUT)/%.o $(NOTRACE_LIB)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(NOTRACE_LIB) $(LIBS)

# g++, Boost.Context and Go for the peers; before any peer is built.
.PHONY: bench-deps bench-build
bench-deps:
	@tools/deps.sh bench
$(PEER_BINS): | bench-deps

# bench/echo.sh runs the echo server sample and its load generator
# (samples/echod/echod.mk), bench/httpd.sh the file server sample.
bench-build: $(BENCH_BINS) $(NOPRIO_BINS) $(NOTRACE_BINS) $(PEER_BINS) $(ECHOD_BIN) $(ECHOLOAD_BIN) \
    $(HTTPD_BIN)

bench: bench-deps
	@$(MAKE) --no-print-directory bench-build
	bench/run.sh $(BUILD)

ECHO_CSV := $(BUILD)/bench/echo.csv
ECHO_SVG := docs/img/echo.svg

.PHONY: bench-plot
bench-plot:
	@tools/deps.sh bench
	@test -s $(ECHO_CSV) || { echo "no $(ECHO_CSV): run make bench (or bench/echo.sh $(BUILD)) first" >&2; exit 1; }
	@mkdir -p $(dir $(ECHO_SVG))
	gnuplot -e "csv='$(ECHO_CSV)'; out='$(ECHO_SVG)'" bench/echo_plot.gp
