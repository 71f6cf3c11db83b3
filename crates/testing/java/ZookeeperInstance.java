/*
 * A stand-in for Spring Cloud Zookeeper's service-discovery payload, so that the Curator driver's
 * discovery commands (CuratorDiscovery.java) write the payload Spring writes: Curator's
 * JsonInstanceSerializer names the payload's class in "@class", so the class must have Spring's
 * name, and its properties Spring's names and order ("id", "name", "metadata"). Not part of the
 * driver's package on purpose; compiled with the driver, never used outside it.
 */
package org.springframework.cloud.zookeeper.discovery;

import java.util.HashMap;
import java.util.Map;

public final class ZookeeperInstance {
    private String id;
    private String name;
    private Map<String, String> metadata = new HashMap<>();

    /** For Jackson. */
    private ZookeeperInstance() {}

    public ZookeeperInstance(String id, String name, Map<String, String> metadata) {
        this.id = id;
        this.name = name;
        this.metadata = metadata;
    }

    public String getId() {
        return id;
    }

    public void setId(String id) {
        this.id = id;
    }

    public String getName() {
        return name;
    }

    public void setName(String name) {
        this.name = name;
    }

    public Map<String, String> getMetadata() {
        return metadata;
    }

    public void setMetadata(Map<String, String> metadata) {
        this.metadata = metadata;
    }
}
