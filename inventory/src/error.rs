//! The crate's one error type: why a node inventory source cannot be read, and why a DRA
//! allocation cannot be matched to a node's devices, in words an operator can act on, and the
//! causes it carries, each a value shown in words only when the error is.

use miggate_compat::escape::escape_within;
use miggate_wire::dra::DRIVER as DRA_DRIVER;

/// Why an inventory source cannot be read, or an allocation cannot be matched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A node inventory source is present but cannot be read: a pool caught mid-update, a
    /// malformed attribute, a MIG layout in flux. The next source is tried instead.
    #[error("{origin} inventory of node `{}` cannot be read: {why}", miggate_compat::escape::escape(.node))]
    Inventory {
        /// Which source (`GpuNode`, `ResourceSlice`, `GFD labels`).
        origin: &'static str,
        /// The node it describes.
        node: String,
        /// Why, naming the object and field where there is one (boxed: every `Result` of this
        /// crate would carry its size).
        why: Box<Unreadable>,
    },
    /// A pod's DRA allocation that cannot be matched to the node's devices: a device of
    /// another pool, one the slices no longer list, one named twice.
    #[error("the DRA allocation on node `{}` cannot be matched to its devices: {why}", miggate_compat::escape::escape(.node))]
    Allocation {
        /// The node the pod is bound to.
        node: String,
        /// Why, naming the device (boxed, as [`Error::Inventory`]'s).
        why: Box<Unmatched>,
    },
}

/// Outside text quoted in a note or error: escaped and cut.
pub(crate) fn quote(text: &str) -> String {
    escape_within(text, 96).into_owned()
}

/// Why a node inventory source that is present cannot be read ([`Error::Inventory`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unreadable {
    /// The node's `GpuNode`.
    #[error(transparent)]
    GpuNode(#[from] GpuNodeProblem),
    /// GPU Feature Discovery's labels on the `Node`.
    #[error(transparent)]
    Labels(#[from] LabelProblem),
    /// The DRA driver's `ResourceSlice`s.
    #[error(transparent)]
    Pool(#[from] PoolProblem),
}

/// Why a `GpuNode` cannot stand for its node.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuNodeProblem {
    /// It has no name, so no node.
    #[error("the GpuNode has no metadata.name")]
    Unnamed,
    /// Its manifest was captured on another node.
    #[error(
        "GpuNode {} holds the inventory of node {} (spec.manifest.host.nodeName)",
        quote(name),
        quote(captured_on)
    )]
    OtherNode {
        /// The `GpuNode`'s name.
        name: String,
        /// The node its manifest says it was captured on.
        captured_on: String,
    },
}

/// Why a node's GFD labels cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabelProblem {
    /// More `nvidia.com/` labels than are read.
    #[error("more than {limit} nvidia.com/ labels")]
    TooManyLabels {
        /// The most read.
        limit: usize,
    },
    /// A count label that is not a device count.
    #[error("nvidia.com/{key}={} is not a device count", quote(value))]
    NotACount {
        /// The label's key without `nvidia.com/`.
        key: String,
        /// Its value.
        value: String,
    },
    /// A `mig.strategy` GFD does not write.
    #[error("unknown nvidia.com/mig.strategy {}", quote(value))]
    UnknownStrategy {
        /// The label's value.
        value: String,
    },
    /// More devices counted than a node is read with.
    #[error("more than {limit} devices counted")]
    TooManyDevices {
        /// The most read.
        limit: usize,
    },
    /// GFD marks the node as breaking the single strategy's rules.
    #[error("nvidia.com/gpu.product ends in -MIG-INVALID: the node breaks the single strategy's rules")]
    InvalidSingleStrategy,
}

/// Why a node's pool of DRA driver slices cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PoolProblem {
    /// More slices for the node than are read.
    #[error("more than {limit} slices for one node")]
    TooManySlices {
        /// The most read.
        limit: usize,
    },
    /// The newest slices name two pools.
    #[error("its slices name more than one pool")]
    SeveralPools,
    /// The pool at its newest generation has not all its slices yet.
    #[error(
        "pool {} generation {generation} has {present} of its {expected} slices; it is being updated",
        quote(pool)
    )]
    Updating {
        /// The pool.
        pool: String,
        /// Its newest generation.
        generation: i64,
        /// The slices of that generation present.
        present: usize,
        /// The slices it says it has (`resourceSliceCount`).
        expected: i64,
    },
    /// A DynamicMIG pool's counter sets.
    #[error("DynamicMIG pool: {0}")]
    CounterSets(CounterSetProblem),
    /// More devices than are read for one node.
    #[error("more than {limit} devices")]
    TooManyDevices {
        /// The most read.
        limit: usize,
    },
    /// One device of a slice.
    #[error("slice {}, device {}: {problem}", quote(slice), quote(device))]
    Device {
        /// The slice's name.
        slice: String,
        /// The device's name.
        device: String,
        /// What is wrong with it.
        problem: DeviceProblem,
    },
}

/// Why a DynamicMIG pool's shared counter sets cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CounterSetProblem {
    /// A set with more counters than are read.
    #[error("counter set {} declares more than {limit} counters", quote(set))]
    TooManyCounters {
        /// The set.
        set: String,
        /// The most read.
        limit: usize,
    },
    /// A counter whose value is not a quantity.
    #[error(
        "counter set {}, counter {}: {} is not a quantity",
        quote(set),
        quote(counter),
        quote(value)
    )]
    NotAQuantity {
        /// The set.
        set: String,
        /// The counter.
        counter: String,
        /// Its value.
        value: String,
    },
    /// A set declared by two slices.
    #[error("counter set {} is declared twice", quote(set))]
    Twice {
        /// The set.
        set: String,
    },
    /// More sets than are read.
    #[error("too many counter sets")]
    TooManySets,
}

/// Why one device of a driver's slice cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceProblem {
    /// A possible partition of a DynamicMIG pool where existing devices were expected.
    #[error("it consumes shared counters (DynamicMIG): a possible partition, not an existing one")]
    PossiblePartition,
    /// No `type` attribute.
    #[error("no `type` attribute")]
    NoType,
    /// An attribute of the wrong type or form.
    #[error(transparent)]
    Attribute(#[from] AttributeProblem),
    /// A driver version other than another device's.
    #[error(
        "`driverVersion` {} differs from another device's {}",
        quote(version),
        quote(seen)
    )]
    DriverDiffers {
        /// This device's.
        version: String,
        /// The one seen before.
        seen: String,
    },
    /// A whole GPU without its UUID.
    #[error("a GPU without a `uuid`")]
    GpuWithoutUuid,
    /// A device consuming from two counter sets.
    #[error("it consumes from more than one counter set")]
    SeveralCounterSets,
    /// A counter set no slice declares.
    #[error(
        "it consumes from counter set {}, which no slice of the pool declares",
        quote(set)
    )]
    UndeclaredSet {
        /// The set.
        set: String,
    },
    /// A counter its set does not declare.
    #[error(
        "it consumes counter {}, which counter set {} does not declare",
        quote(counter),
        quote(set)
    )]
    UndeclaredCounter {
        /// The counter.
        counter: String,
        /// The set.
        set: String,
    },
    /// A consumed amount that is not a quantity.
    #[error("counter {}: {} is not a quantity", quote(counter), quote(value))]
    NotAQuantity {
        /// The counter.
        counter: String,
        /// The amount.
        value: String,
    },
}

/// Why a device attribute cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttributeProblem {
    /// Of another type than the attribute takes.
    #[error("`{name}` is not a {kind} attribute")]
    WrongType {
        /// The attribute.
        name: &'static str,
        /// The type it must have (`string`, `version`, `int`).
        kind: &'static str,
    },
    /// Empty or only white space.
    #[error("`{name}` is empty")]
    Empty {
        /// The attribute.
        name: &'static str,
    },
    /// Too long, or holding characters no real value has.
    #[error("`{name}` is not a plausible value ({})", quote(value))]
    Implausible {
        /// The attribute.
        name: &'static str,
        /// Its value, trimmed.
        value: String,
    },
    /// Not of the form its attribute takes (a UUID, a MIG profile).
    #[error("`{name}`: {error}")]
    Unparsable {
        /// The attribute.
        name: &'static str,
        /// The reader's error (boxed: it is large, and every device's `Result` would carry
        /// its size).
        error: Box<miggate_compat::Error>,
    },
}

/// Why a pod's DRA allocation cannot be matched to its node's devices ([`Error::Allocation`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unmatched {
    /// More allocated devices than are read.
    #[error("more than {limit} allocated devices")]
    TooMany {
        /// The most read.
        limit: usize,
    },
    /// The node's pool cannot be read.
    #[error(transparent)]
    Pool(#[from] PoolProblem),
    /// A device allocated twice.
    #[error("device `{}` is allocated twice", quote(&format!("{pool}/{device}")))]
    Twice {
        /// Its pool.
        pool: String,
        /// The device.
        device: String,
    },
    /// A device allocated on a node without the driver's slices.
    #[error(
        "device `{}` is allocated, but the node has no slice of driver {DRA_DRIVER}",
        quote(&format!("{pool}/{device}"))
    )]
    NoSlices {
        /// Its pool.
        pool: String,
        /// The device.
        device: String,
    },
    /// A device of another pool than the node's.
    #[error(
        "device `{}` is from pool `{}`, not the node's pool `{}`",
        quote(device),
        quote(pool),
        quote(node_pool)
    )]
    OtherPool {
        /// The device.
        device: String,
        /// Its pool.
        pool: String,
        /// The node's pool.
        node_pool: String,
    },
    /// A device the pool's newest slices do not list.
    #[error(
        "no device `{}` in pool `{}` at its newest generation (the slices changed since the allocation)",
        quote(device),
        quote(pool)
    )]
    Missing {
        /// The device.
        device: String,
        /// The pool.
        pool: String,
    },
    /// An allocated device that cannot be read.
    #[error("device {}: {problem}", quote(device))]
    Device {
        /// The device.
        device: String,
        /// What is wrong with it.
        problem: DeviceProblem,
    },
    /// An allocated device that is neither a GPU nor a MIG slice.
    #[error("device {} is neither a GPU nor a MIG slice", quote(device))]
    NotAGpu {
        /// The device.
        device: String,
    },
}
