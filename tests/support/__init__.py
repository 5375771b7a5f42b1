"""Helpers the tests share (not tests): transports and harnesses, local services, the
profile server, the subprocess servers, the SDK matrix's plugin and compatibility tables."""
