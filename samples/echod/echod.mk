# samples/echod/echod.mk - the echo server (echod), its load generator
# (echoload) and their end-to-end test. Included by the top-level Makefile,
# which defines BUILD, CC, ALL_CFLAGS, ALL_LDFLAGS, LIBS, STATIC_LIB, HEADERS
# and RUNNER.
#
#   make test-echod    builds both and runs tests/echod/run.sh
#
# echoload.c and load_*.c make echoload; every other .c here makes echod;
# cli.c (option parsing) serves both.
#
# Included before the Makefile's first rule (its `all` names ECHOD_BIN and
# ECHOLOAD_BIN), so the rules below must not become the default goal.
ifeq ($(.DEFAULT_GOAL),)
.DEFAULT_GOAL := all
endif

ECHOD_BIN := $(BUILD)/samples/echod
ECHOLOAD_BIN := $(BUILD)/samples/echoload
ECHOD_PROBE_BIN := $(BUILD)/tests/echod_probe

ECHOLOAD_ONLY_SRCS := samples/echod/echoload.c $(wildcard samples/echod/load_*.c)
ECHOLOAD_SRCS := $(ECHOLOAD_ONLY_SRCS) samples/echod/cli.c
ECHOD_SRCS := $(filter-out $(ECHOLOAD_ONLY_SRCS),$(wildcard samples/echod/*.c))
ECHOD_OBJS := $(ECHOD_SRCS:%.c=$(BUILD)/obj/%.o)
ECHOLOAD_OBJS := $(ECHOLOAD_SRCS:%.c=$(BUILD)/obj/%.o)
ECHOD_PROBE_OBJS := $(BUILD)/obj/tests/echod/probe.o

# Programs, not library code: no -fPIC or hidden visibility.
$(sort $(ECHOD_OBJS) $(ECHOLOAD_OBJS)): $(BUILD)/obj/samples/echod/%.o: samples/echod/%.c \
    $(wildcard samples/echod/*.h) $(HEADERS) $(DEPS_STAMP) $(SYSROOT_STAMP)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ECHOD_CFLAGS) -c $< -o $@

$(ECHOD_PROBE_OBJS): $(BUILD)/obj/tests/echod/%.o: tests/echod/%.c $(HEADERS) \
    $(DEPS_STAMP) $(SYSROOT_STAMP)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

# Both link libgoro-tls (--tls; tls/tls.mk), where it is built.
ECHOD_TLS := $(if $(TLS_BUILT),$(TLS_STATIC_LIB))
ECHOD_TLS_LIBS := $(if $(TLS_BUILT),$(SSL_LIBS))
ECHOD_CFLAGS := $(if $(TLS_BUILT),-DECHOD_TLS)
$(ECHOD_BIN): $(ECHOD_OBJS) $(ECHOD_TLS) $(STATIC_LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $(ECHOD_OBJS) $(ECHOD_TLS) $(STATIC_LIB) \
	  $(ECHOD_TLS_LIBS) $(LIBS)

$(ECHOLOAD_BIN): $(ECHOLOAD_OBJS) $(ECHOD_TLS) $(STATIC_LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $(ECHOLOAD_OBJS) $(ECHOD_TLS) $(STATIC_LIB) \
	  $(ECHOD_TLS_LIBS) $(LIBS)

$(ECHOD_PROBE_BIN): $(ECHOD_PROBE_OBJS) $(STATIC_LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $(ECHOD_PROBE_OBJS) $(STATIC_LIB) $(LIBS)

.PHONY: test-echod
test-echod: $(ECHOD_BIN) $(ECHOLOAD_BIN) $(ECHOD_PROBE_BIN)
	$(if $(RUNNER),@echo "test-echod: skipped in an emulated build",tests/echod/run.sh $(BUILD))
