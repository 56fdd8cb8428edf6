//! The topologies: one `static SCENARIO` per `--cfg scenario="…"`, built from GPUs and MIG
//! devices written as `const`s.

use std::ffi::c_uint;

use crate::*;

const H100: &str = "NVIDIA H100 80GB HBM3";
const H100_MIB: u64 = 81559;

const fn whole(uuid: &'static str, bus: &'static str, mig: Mig) -> Gpu {
    Gpu {
        uuid: Ok(uuid),
        name: H100,
        bus_id: Ok((bus, 0, 0)),
        memory_mib: Ok(H100_MIB),
        cc: Ok((9, 0)),
        mig,
        handle: Ok(()),
        set_mig: Ok(SUCCESS),
        set_pm: SUCCESS,
    }
}

const fn mig(uuid: &'static str, name: &'static str, gi: c_uint, ci: c_uint, memory_mib: u64) -> Slot {
    Slot::Mig(MigDev {
        uuid,
        name,
        gi,
        ci,
        memory_mib,
    })
}

const MIG_OFF: Mig = Mig::Mode {
    current: 0,
    pending: 0,
    max: 0,
    slots: &[],
};

const fn mig_on(slots: &'static [Slot]) -> Mig {
    Mig::Mode {
        current: 1,
        pending: 1,
        max: 7,
        slots,
    }
}

const fn ok(gpus: &'static [Gpu]) -> Scenario {
    Scenario {
        init: SUCCESS,
        driver: "580.82.07",
        cuda: 13000,
        count: Ok(gpus.len() as c_uint),
        gpus,
    }
}

/// GPU0: MIG on with 3g.40gb + 2x 1g.10gb + 1g.10gb+me; GPU1: MIG off.
const H100_MIXED: &[Gpu] = &[
    whole(
        "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
        "00000000:18:00.0",
        mig_on(&[
            mig(
                "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde",
                "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
                2,
                0,
                40192,
            ),
            mig(
                "MIG-b4b2228d-6933-5839-bc0e-41ab9edb61c6",
                "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
                9,
                0,
                9984,
            ),
            mig(
                "MIG-c71dc464-b9f9-5611-9d29-d601a47cffd6",
                "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
                10,
                0,
                9984,
            ),
            mig(
                "MIG-0f03f623-f28d-5831-bc51-f450dad99b8c",
                "NVIDIA H100 80GB HBM3 MIG 1g.10gb+me",
                13,
                0,
                9984,
            ),
        ]),
    ),
    whole(
        "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
        "00000000:2A:00.0",
        MIG_OFF,
    ),
];

#[cfg(any(scenario = "h100_mixed", scenario = "no_name"))]
pub(crate) static SCENARIO: Scenario = ok(H100_MIXED);

/// A GPU UUID with a U+FFFD inside (what a lossy decode of a corrupt UUID gives).
#[cfg(scenario = "bad_gpu_uuid")]
pub(crate) static SCENARIO: Scenario = ok(&[whole(
    "GPU-5c89852c-d268-\u{fffd}-1b07-005d5ae1dc3f",
    "00000000:18:00.0",
    MIG_OFF,
)]);

/// A MIG device UUID with a right-to-left override inside.
#[cfg(scenario = "bad_mig_uuid")]
pub(crate) static SCENARIO: Scenario = ok(&[whole(
    "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
    "00000000:18:00.0",
    mig_on(&[mig(
        "MIG-7089d0f3-\u{202e}293f-58c9",
        "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
        2,
        0,
        40192,
    )]),
)]);

#[cfg(scenario = "mig_no_instances")]
pub(crate) static SCENARIO: Scenario = ok(&[whole(
    "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
    "00000000:18:00.0",
    mig_on(&[]),
)]);

/// Positions 0 and 3 filled out of 7; the others are empty (NOT_FOUND or INVALID_ARGUMENT) or
/// not this process's (NO_PERMISSION).
#[cfg(scenario = "mig_gaps")]
pub(crate) static SCENARIO: Scenario = ok(&[whole(
    "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
    "00000000:18:00.0",
    mig_on(&[
        mig(
            "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde",
            "NVIDIA H100 80GB HBM3 MIG 1g.20gb",
            3,
            0,
            19968,
        ),
        Slot::Empty(ERROR_NOT_FOUND),
        Slot::Empty(ERROR_INVALID_ARGUMENT),
        mig(
            "MIG-b4b2228d-6933-5839-bc0e-41ab9edb61c6",
            "NVIDIA H100 80GB HBM3 MIG 2g.20gb",
            5,
            0,
            19968,
        ),
        Slot::Empty(ERROR_NOT_FOUND),
        // Another container's slice.
        Slot::Empty(ERROR_NO_PERMISSION),
    ]),
)]);

/// GPU0: MIG on, off after reset (still sliced); GPU1: MIG off, on after reset (still whole);
/// GPU2: not MIG-capable.
#[cfg(scenario = "pending")]
pub(crate) static SCENARIO: Scenario = ok(&[
    whole(
        "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
        "00000000:18:00.0",
        Mig::Mode {
            current: 1,
            pending: 0,
            max: 7,
            slots: &[mig(
                "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde",
                "NVIDIA H100 80GB HBM3 MIG 7g.80gb",
                0,
                0,
                80896,
            )],
        },
    ),
    whole(
        "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
        "00000000:2A:00.0",
        Mig::Mode {
            current: 0,
            pending: 1,
            max: 0,
            slots: &[],
        },
    ),
    Gpu {
        uuid: Ok("GPU-6109dd5c-d378-24ee-f344-79b537574ea6"),
        name: "NVIDIA L4",
        bus_id: Ok(("00000000:AB:00.0", 0, 0xab)),
        memory_mib: Ok(23034),
        cc: Ok((8, 9)),
        mig: Mig::Fails(ERROR_NOT_SUPPORTED),
        handle: Ok(()),
        set_mig: Err(ERROR_NOT_SUPPORTED),
        set_pm: SUCCESS,
    },
]);

/// The MIG guide's H100 example: three compute instances in one 3g GPU instance, two 1g.
#[cfg(scenario = "compute_instances")]
pub(crate) static SCENARIO: Scenario = ok(&[whole(
    "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
    "00000000:18:00.0",
    mig_on(&[
        mig(
            "MIG-c788539f-c1ea-5a36-8b4d-9b07d024b1bb",
            "NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb",
            2,
            0,
            40192,
        ),
        mig(
            "MIG-405bbda1-6b05-535f-9702-f95e8cd170ce",
            "NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb",
            2,
            1,
            40192,
        ),
        mig(
            "MIG-df7e5a27-eeea-51a0-9055-b36d5a552879",
            "NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb",
            2,
            2,
            40192,
        ),
        mig(
            "MIG-b4b2228d-6933-5839-bc0e-41ab9edb61c6",
            "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
            9,
            0,
            9984,
        ),
        mig(
            "MIG-c71dc464-b9f9-5611-9d29-d601a47cffd6",
            "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
            10,
            0,
            9984,
        ),
    ]),
)]);

/// Name forms seen or plausible across drivers, one that holds no profile, a legacy 4-digit
/// PCI domain; the instance-id symbols are missing (see the cfgs on their exports).
#[cfg(scenario = "odd_names")]
pub(crate) static SCENARIO: Scenario = ok(&[Gpu {
    bus_id: Ok(("0000:9a:00.0", 0, 0x9a)),
    ..whole(
        "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
        "",
        mig_on(&[
            mig(
                "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde",
                "MIG 1g.10gb",
                1,
                0,
                9984,
            ),
            mig(
                "MIG-b4b2228d-6933-5839-bc0e-41ab9edb61c6",
                "NVIDIA H100 80GB HBM3 1g.10gb+me",
                2,
                0,
                9984,
            ),
            mig(
                "MIG-c71dc464-b9f9-5611-9d29-d601a47cffd6",
                " NVIDIA H100 80GB HBM3 MIG  2g.20gb ",
                3,
                0,
                19968,
            ),
            mig(
                "MIG-0f03f623-f28d-5831-bc51-f450dad99b8c",
                "NVIDIA H100 80GB HBM3",
                4,
                0,
                9984,
            ),
            mig(
                "MIG-405bbda1-6b05-535f-9702-f95e8cd170ce",
                "NVIDIA H100 80GB HBM3 MIG mystery",
                5,
                0,
                9984,
            ),
        ]),
    )
}]);

/// GPU0's MIG walk hits a lost device at position 1; GPU1 is fine.
#[cfg(scenario = "mig_walk_fails")]
pub(crate) static SCENARIO: Scenario = ok(&[
    whole(
        "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
        "00000000:18:00.0",
        mig_on(&[
            mig(
                "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde",
                "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
                2,
                0,
                40192,
            ),
            Slot::Empty(ERROR_GPU_IS_LOST),
        ]),
    ),
    whole(
        "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
        "00000000:2A:00.0",
        MIG_OFF,
    ),
]);

/// GPU0 answers only its name: every other per-GPU call fails.
#[cfg(scenario = "gpu_facts_fail")]
pub(crate) static SCENARIO: Scenario = Scenario {
    cuda: 12020,
    ..ok(&[
        Gpu {
            uuid: Err(ERROR_UNKNOWN),
            name: H100,
            bus_id: Err(ERROR_GPU_IS_LOST),
            memory_mib: Err(ERROR_UNKNOWN),
            cc: Err(ERROR_UNKNOWN),
            mig: Mig::Fails(ERROR_UNKNOWN),
            handle: Ok(()),
            set_mig: Err(ERROR_UNKNOWN),
            set_pm: ERROR_UNKNOWN,
        },
        whole(
            "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
            "00000000:2A:00.0",
            MIG_OFF,
        ),
    ])
};

#[cfg(any(scenario = "init_fails", scenario = "no_init"))]
pub(crate) static SCENARIO: Scenario = Scenario {
    init: ERROR_DRIVER_NOT_LOADED,
    ..ok(&[])
};

#[cfg(scenario = "count_fails")]
pub(crate) static SCENARIO: Scenario = Scenario {
    count: Err(ERROR_UNKNOWN),
    ..ok(H100_MIXED)
};

#[cfg(scenario = "handle_fails")]
pub(crate) static SCENARIO: Scenario = ok(&[
    whole(
        "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
        "00000000:18:00.0",
        MIG_OFF,
    ),
    Gpu {
        handle: Err(ERROR_GPU_IS_LOST),
        ..whole(
            "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
            "00000000:2A:00.0",
            MIG_OFF,
        )
    },
]);

/// Boot recovery's NVML control (`recovery/tests/nvml_control.rs`, the `recover` CLI tests):
/// GPU0 an H200, MIG off, whose mode changes at once (Hopper); GPU1 MIG off, whose mode stays
/// pending (an Ampere held by another client); GPU2 an L4, not MIG-capable, where persistence
/// needs root. One library per scenario name, so tests that change state do not meet.
#[cfg(any(scenario = "control_list", scenario = "control_set", scenario = "control_pm"))]
pub(crate) static SCENARIO: Scenario = ok(&[
    Gpu {
        name: "NVIDIA H200",
        ..whole(
            "GPU-b2acda36-db78-a209-f9ef-d07b4336c449",
            "00000000:18:00.0",
            MIG_OFF,
        )
    },
    Gpu {
        name: "NVIDIA A100-SXM4-80GB",
        set_mig: Ok(ERROR_IN_USE),
        ..whole(
            "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
            "0000:2a:00.0",
            MIG_OFF,
        )
    },
    Gpu {
        uuid: Ok("GPU-6109dd5c-d378-24ee-f344-79b537574ea6"),
        name: "NVIDIA L4",
        bus_id: Ok(("00000000:AB:00.0", 0, 0xab)),
        memory_mib: Ok(23034),
        cc: Ok((8, 9)),
        mig: Mig::Fails(ERROR_NOT_SUPPORTED),
        handle: Ok(()),
        set_mig: Err(ERROR_NOT_SUPPORTED),
        set_pm: ERROR_NO_PERMISSION,
    },
]);

/// The `recover` end to end: the stand-in tree's H200 with MIG on (its instances come from the
/// stand-in nvidia-smi).
#[cfg(scenario = "recover_e2e")]
pub(crate) static SCENARIO: Scenario = ok(&[Gpu {
    name: "NVIDIA H200",
    ..whole(
        "GPU-b2acda36-db78-a209-f9ef-d07b4336c449",
        "00000000:18:00.0",
        Mig::Mode {
            current: 1,
            pending: 1,
            max: 7,
            slots: &[],
        },
    )
}]);
