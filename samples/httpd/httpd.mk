# samples/httpd/httpd.mk - the static file server sample (httpd) and its
# end-to-end test. Included by the top-level Makefile, which defines BUILD,
# CC, ALL_CFLAGS, ALL_LDFLAGS, LIBS, STATIC_LIB, HEADERS and RUNNER.
#
#   make test-httpd    builds it and runs tests/httpd/run.sh (curl, wrk)
#
# Included before the Makefile's first rule (its `all` names HTTPD_BIN),
# so the rules below must not become the default goal.
ifeq ($(.DEFAULT_GOAL),)
.DEFAULT_GOAL := all
endif

HTTPD_BIN := $(BUILD)/samples/httpd
HTTPD_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard samples/httpd/*.c))

# A program, not library code: no -fPIC or hidden visibility.
$(HTTPD_OBJS): $(BUILD)/obj/samples/httpd/%.o: samples/httpd/%.c $(wildcard samples/httpd/*.h) \
    $(HEADERS) $(DEPS_STAMP) $(SYSROOT_STAMP)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(HTTPD_BIN): $(HTTPD_OBJS) $(STATIC_LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $(HTTPD_OBJS) $(STATIC_LIB) $(LIBS)

.PHONY: test-httpd
test-httpd: $(HTTPD_BIN)
	$(if $(RUNNER),@echo "test-httpd: skipped in an emulated build",@tools/deps.sh httpd && tests/httpd/run.sh $(BUILD))
