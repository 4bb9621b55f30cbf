

def test_an_error_quoting_a_hostile_value_is_cut_in_the_middle_keeping_flag_and_reason():
    from workflows.main import MAX_ERROR_LINE, error_line

    line = error_line("--server-url 'http://" + "[" * 5000 + "' does not appear to be an IPv4 or IPv6 address")
    assert len(line) < MAX_ERROR_LINE + 60
    assert line.startswith("--server-url 'http://[[[")
    assert line.endswith("does not appear to be an IPv4 or IPv6 address")
    assert "characters cut" in line
    assert error_line("short one") == "short one"
