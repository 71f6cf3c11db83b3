//! What the discovery crate's server tests share: a discovery on a base path, and an instance of a
//! given type with fixed address, port and registration time.

use zk_recipes_discovery::{ServiceDiscovery, ServiceInstance, ServiceType};
use zk_recipes_framework::Framework;

/// A discovery (raw JSON payloads) under `base_path`.
pub fn discovery(framework: &Framework, base_path: &str) -> ServiceDiscovery {
    ServiceDiscovery::builder(framework, base_path).build().expect("discovery")
}

/// Instance `id` of service `name`, of `service_type`, at 10.0.0.7:8080.
pub fn instance(name: &str, id: &str, service_type: ServiceType) -> ServiceInstance {
    ServiceInstance::builder(name)
        .id(id)
        .address("10.0.0.7")
        .port(8080)
        .service_type(service_type)
        .registration_time_utc(1_700_000_000_123)
        .build()
}
