from unified.machine import cpu_info, cpu_kind, git_commit

AMD = "processor\t: 0\nmodel name\t: AMD EPYC 9R14 96-Core Processor\nflags\t\t: fpu avx512f avx512_bf16\n"
XEON = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8488C\nflags\t\t: fpu avx512_bf16 amx_bf16 amx_tile\n"


def test_cpu_info_names_the_kind_and_the_bf16_flags():
    amd, xeon = cpu_info(AMD), cpu_info(XEON)
    assert (amd["kind"], amd["avx512_bf16"], amd["amx_bf16"]) == ("AMD EPYC", True, False)
    assert (xeon["kind"], xeon["amx_bf16"]) == ("Intel Xeon (AMX)", True)
    assert amd["model"] == "AMD EPYC 9R14 96-Core Processor"
    assert cpu_kind("Intel(R) Xeon(R) Gold", False) == "Intel Xeon"
    assert cpu_info("")["model"]  # no /proc/cpuinfo: still a record


def test_this_machine_and_checkout_are_described():
    me = cpu_info()
    assert me["cores"] >= 1 and me["kind"]
    commit = git_commit()
    assert commit is None or len(commit.split("+")[0]) == 40
