//! [`RequestMatch`]: which requests a fault is armed for (op codes, optionally a path prefix).

use super::wire::{Request, CREATE_OP_CODES, DELETE_OP_CODES, MULTI_OP_CODE, SET_DATA_OP_CODE};

/// Which request [`FaultProxy::cut_after_next_reply`] cuts after: one of some op codes, and
/// optionally only if it touches a path under a prefix.
///
/// The op codes are ZooKeeper's (`ZooDefs.OpCode`): 1 create, 2 delete, 3 exists, 4 getData,
/// 5 setData, 8 getChildren, 12 getChildren2, 13 check, 14 multi, 15 create2, 19 createContainer,
/// 20 deleteContainer, 21 createTTL, 22 multiRead, … Creates and deletes inside a multi do not
/// count as creates or deletes: match the multi.
///
/// # Example
/// ```
/// use zk_recipes_testing::RequestMatch;
///
/// // The next multi that creates, deletes or checks anything under /app/queue-locks.
/// let ack = RequestMatch::multi().under("/app/queue-locks");
/// // The next delete, setData or getData of any path.
/// let any = RequestMatch::op_codes([2, 5, 4]);
/// # let _ = (ack, any);
/// ```
///
/// [`FaultProxy::cut_after_next_reply`]: crate::FaultProxy::cut_after_next_reply
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMatch {
    op_codes: Vec<i32>,
    under: Option<String>,
}

impl RequestMatch {
    /// Requests with any of these op codes.
    pub fn op_codes(op_codes: impl IntoIterator<Item = i32>) -> Self {
        Self { op_codes: op_codes.into_iter().collect(), under: None }
    }

    /// Plain creates: 1 create, 15 create2, 19 createContainer, 21 createTTL.
    pub fn create() -> Self {
        Self::op_codes(CREATE_OP_CODES)
    }

    /// Plain deletes: 2 delete, 20 deleteContainer.
    pub fn delete() -> Self {
        Self::op_codes(DELETE_OP_CODES)
    }

    /// 5 setData.
    pub fn set_data() -> Self {
        Self::op_codes([SET_DATA_OP_CODE])
    }

    /// 14 multi (a transaction of creates, deletes, setDatas and checks).
    pub fn multi() -> Self {
        Self::op_codes([MULTI_OP_CODE])
    }

    /// Only requests on `prefix` or a path below it (a plain string prefix: `/a/b` also matches
    /// `/a/bc`). A multi matches if any of its operations does.
    pub fn under(mut self, prefix: impl Into<String>) -> Self {
        self.under = Some(prefix.into());
        self
    }

    pub(super) fn matches(&self, request: &Request) -> bool {
        if !self.op_codes.contains(&request.op_code) {
            return false;
        }
        let Some(prefix) = &self.under else { return true };
        request.path.starts_with(prefix.as_str())
            || request.ops.iter().any(|(_, path)| path.starts_with(prefix.as_str()))
    }
}
