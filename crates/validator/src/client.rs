//! A client of a validator's market and pricing API (`pog market`, `pog score`, `pog price`
//! against a validator): signed orders, cancellations and clearings, the book, the history,
//! scores and posted prices.

use crate::market::{
    fresh_clear_nonce, BookView, CancelMessage, Cancelled, ClearMessage, HistoryPage, MarketInfo,
    SubmitMessage, Submitted, CANCEL_KIND, CLEAR_KIND, CLEAR_MAX_AGE_MS, MAX_BOOK_PAGE,
    SUBMIT_KIND,
};
use crate::pricing::{PricePage, ScorePage, ScoreView};
use pog_market::{ClearingRecord, GpuClass, Mechanism, Order, OrderId};
use pog_proof::timing::now_ms;
use pog_signed::{Envelope, Identity};

/// A client of a validator's market API, signing with `identity`.
pub struct MarketClient {
    base: String,
    http: reqwest::Client,
}

/// Why a market request failed on the client's side.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The request got no answer (no connection, a timeout, a broken transfer).
    #[error("could not reach the validator at {url}: {cause}")]
    Unreachable {
        /// The URL requested.
        url: String,
        /// What went wrong.
        cause: String,
    },
    /// The validator answered with an error status.
    #[error("the validator refused the request (HTTP {status}): {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The validator's `error` text, or the whole body when it has none.
        message: String,
    },
    /// The answer does not decode as the endpoint's answer type.
    #[error("the validator's answer is not what the market API returns: {0}")]
    BadAnswer(String),
    /// The message could not be signed or encoded: nothing is sent.
    #[error(transparent)]
    Wire(#[from] pog_signed::WireError),
    /// The client (no redirects) could not be built: nothing is sent.
    #[error(transparent)]
    Client(#[from] pog_net::http::BuildClientError),
}

impl MarketClient {
    /// A client of the validator at `base` (http or https URL, no trailing path): 30 s a
    /// request, no redirects (a signed order must not be relayed elsewhere); an error when
    /// that client cannot be built.
    pub fn new(base: &str) -> Result<MarketClient, ClientError> {
        Ok(MarketClient {
            base: base.trim_end_matches('/').to_string(),
            http: pog_net::http::ClientSettings {
                timeout: Some(std::time::Duration::from_secs(30)),
                ..pog_net::http::ClientSettings::new("market")
            }
            .build()?,
        })
    }

    async fn answer<T: serde::de::DeserializeOwned>(
        &self,
        url: String,
        request: reqwest::RequestBuilder,
    ) -> Result<T, ClientError> {
        let response = request.send().await.map_err(|e| ClientError::Unreachable {
            url: url.clone(),
            cause: e.to_string(),
        })?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| ClientError::Unreachable {
                url,
                cause: e.to_string(),
            })?;
        if !status.is_success() {
            let message = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                .unwrap_or(text);
            return Err(ClientError::Refused {
                status: status.as_u16(),
                message,
            });
        }
        serde_json::from_str(&text).map_err(|e| ClientError::BadAnswer(e.to_string()))
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let url = format!("{}{path}", self.base);
        self.answer(url.clone(), self.http.get(&url)).await
    }

    async fn post<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        envelope: &Envelope,
    ) -> Result<T, ClientError> {
        let url = format!("{}{path}", self.base);
        self.answer(url.clone(), self.http.post(&url).json(envelope))
            .await
    }

    /// The validator's key and classes.
    pub async fn info(&self) -> Result<MarketInfo, ClientError> {
        self.get("/v1/market/info").await
    }

    /// Submits an order signed by `owner` (whose key must be the order's owner), open for
    /// `lifetime` from now unless it fills; a lifetime near the longest the book allows is
    /// shortened by [`CLEAR_MAX_AGE_MS`], so that a validator whose clock is a few minutes
    /// behind still takes it.
    pub async fn submit(
        &self,
        owner: &Identity,
        order: Order,
        lifetime: std::time::Duration,
    ) -> Result<Submitted, ClientError> {
        let validator = self.info().await?.validator;
        let longest = pog_market::MAX_ORDER_LIFETIME_MS - CLEAR_MAX_AGE_MS;
        let lifetime_ms = u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX);
        let expires_at_ms = now_ms().saturating_add(lifetime_ms.min(longest));
        let envelope = owner.seal(
            SUBMIT_KIND,
            &SubmitMessage {
                validator,
                order,
                expires_at_ms: Some(expires_at_ms),
            },
        )?;
        self.post("/v1/market/submit", &envelope).await
    }

    /// Cancels one of `owner`'s open orders, found in the book by its id.
    pub async fn cancel(&self, owner: &Identity, id: OrderId) -> Result<Cancelled, ClientError> {
        let book = self.book(None).await?;
        let key = owner.public_key();
        let sequence = book
            .bids
            .iter()
            .chain(&book.asks)
            .find(|e| e.order.id() == &id && e.order.owner() == key)
            .map(|e| e.sequence)
            .ok_or_else(|| ClientError::Refused {
                status: 404,
                message: format!("this key has no order {id} open in the book"),
            })?;
        self.cancel_sequence(owner, id, sequence).await
    }

    /// Cancels `owner`'s order `id`, the one with this sequence number.
    pub async fn cancel_sequence(
        &self,
        owner: &Identity,
        id: OrderId,
        sequence: u64,
    ) -> Result<Cancelled, ClientError> {
        let validator = self.info().await?.validator;
        let message = CancelMessage {
            validator,
            id,
            sequence: Some(sequence),
        };
        let envelope = owner.seal(CANCEL_KIND, &message)?;
        self.post("/v1/market/cancel", &envelope).await
    }

    /// Clears a class, signed by the validator's own identity: a new request, with a fresh
    /// nonce, each time.
    pub async fn clear(
        &self,
        operator: &Identity,
        class: GpuClass,
        mechanism: Mechanism,
    ) -> Result<ClearingRecord, ClientError> {
        let validator = self.info().await?.validator;
        let message = ClearMessage {
            validator,
            class,
            mechanism,
            at_ms: now_ms(),
            nonce: Some(fresh_clear_nonce()),
        };
        let envelope = operator.seal(CLEAR_KIND, &message)?;
        self.post("/v1/market/clear", &envelope).await
    }

    /// A page of the validator's scores, by GPU UUID after `after`.
    pub async fn scores(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ScorePage, ClientError> {
        let path = match after {
            Some(a) => format!("/v1/scores?after={}&limit={limit}", path_segment(a)),
            None => format!("/v1/scores?limit={limit}"),
        };
        self.get(&path).await
    }

    /// One GPU's score and posted price.
    pub async fn score(&self, uuid: &str) -> Result<ScoreView, ClientError> {
        self.get(&format!("/v1/scores/{}", path_segment(uuid)))
            .await
    }

    /// A page of one GPU's posted prices numbered above `after`.
    pub async fn price_history(
        &self,
        uuid: &str,
        after: Option<i64>,
        limit: usize,
    ) -> Result<PricePage, ClientError> {
        self.get(&format!(
            "/v1/prices/{}/history?after={}&limit={limit}",
            path_segment(uuid),
            after.unwrap_or(0)
        ))
        .await
    }

    /// Every order open now, of one class or of all, read page by page (the pages go in
    /// submission order), listed by price ([`BookView::by_price`]: bids highest first, asks
    /// lowest first); the result has no `next_after`.
    pub async fn book(&self, class: Option<&GpuClass>) -> Result<BookView, ClientError> {
        let mut whole = BookView {
            bids: Vec::new(),
            asks: Vec::new(),
            next_after: None,
        };
        let mut after = None;
        loop {
            let page = self.book_page(class, after, MAX_BOOK_PAGE).await?;
            whole.bids.extend(page.bids);
            whole.asks.extend(page.asks);
            match page.next_after {
                // Sequences only grow: a page that does not move on is the server's fault.
                Some(next) if after.is_none_or(|a| next > a) => after = Some(next),
                Some(next) => {
                    return Err(ClientError::BadAnswer(format!(
                        "the book's next page starts after {next}, not after this one's {after:?}"
                    )))
                }
                None => return Ok(whole.by_price()),
            }
        }
    }

    /// One page of the open orders (see [`crate::market::Market::book`]).
    pub async fn book_page(
        &self,
        class: Option<&GpuClass>,
        after: Option<u64>,
        limit: usize,
    ) -> Result<BookView, ClientError> {
        let mut query = vec![format!("limit={limit}")];
        if let Some(c) = class {
            query.push(format!("class={}", path_segment(c.as_str())));
        }
        if let Some(a) = after {
            query.push(format!("after={a}"));
        }
        self.get(&format!("/v1/market/book?{}", query.join("&")))
            .await
    }

    /// A page of clearings after `after`.
    pub async fn history(
        &self,
        after: Option<u64>,
        limit: usize,
    ) -> Result<HistoryPage, ClientError> {
        let path = match after {
            Some(a) => format!("/v1/market/history?after={a}&limit={limit}"),
            None => format!("/v1/market/history?limit={limit}"),
        };
        self.get(&path).await
    }

    /// The leases `filter` selects (`GET /v1/market/leases`), the newest first, as a page
    /// signed by one of `trusted` (the validator keys the caller trusts): an answer signed by
    /// another key, or not signed, is refused.
    pub async fn leases(
        &self,
        filter: &crate::market::LeaseFilter,
        trusted: &[pog_signed::PublicKey],
    ) -> Result<crate::market::LeasePage, ClientError> {
        let mut query = vec![format!("limit={}", filter.limit.unwrap_or(100))];
        for (name, value) in [
            ("party", &filter.party),
            ("gpu", &filter.gpu),
            ("id", &filter.id),
        ] {
            if let Some(v) = value {
                query.push(format!("{name}={}", path_segment(v)));
            }
        }
        let envelope: Envelope = self
            .get(&format!("/v1/market/leases?{}", query.join("&")))
            .await?;
        let bytes =
            serde_json::to_vec(&envelope).map_err(|e| ClientError::BadAnswer(e.to_string()))?;
        let (page, signer): (crate::market::LeasePage, pog_signed::PublicKey) =
            pog_signed::decode(&bytes, crate::market::LEASES_KIND)
                .map_err(|e| ClientError::BadAnswer(format!("the lease page: {e}")))?;
        if !trusted.contains(&signer) {
            return Err(ClientError::BadAnswer(format!(
                "the lease page is signed by {signer}, not by a trusted validator key"
            )));
        }
        Ok(page)
    }

    /// The settlements `filter` selects (`GET /v1/market/settlements`), the newest first, as a
    /// page signed by one of `trusted`: an answer signed by another key, or not signed, is
    /// refused.
    pub async fn settlements(
        &self,
        filter: &crate::settlement::SettlementFilter,
        trusted: &[pog_signed::PublicKey],
    ) -> Result<crate::settlement::SettlementPage, ClientError> {
        let mut query = vec![format!("limit={}", filter.limit.unwrap_or(100))];
        for (name, value) in [("party", &filter.party), ("lease", &filter.lease)] {
            if let Some(v) = value {
                query.push(format!("{name}={}", path_segment(v)));
            }
        }
        let envelope: Envelope = self
            .get(&format!("/v1/market/settlements?{}", query.join("&")))
            .await?;
        let bytes =
            serde_json::to_vec(&envelope).map_err(|e| ClientError::BadAnswer(e.to_string()))?;
        let (page, signer): (crate::settlement::SettlementPage, pog_signed::PublicKey) =
            pog_signed::decode(&bytes, crate::settlement::SETTLEMENTS_KIND)
                .map_err(|e| ClientError::BadAnswer(format!("the settlement page: {e}")))?;
        if !trusted.contains(&signer) {
            return Err(ClientError::BadAnswer(format!(
                "the settlement page is signed by {signer}, not by a trusted validator key"
            )));
        }
        Ok(page)
    }

    /// Reports, as lease `lease_id`'s provider, that its access could not be given to the
    /// renter from `at_ms` on (`POST /v1/market/undelivered`): the hours after are refunded.
    /// Returns the time the validator keeps (its first report's).
    pub async fn report_undelivered(
        &self,
        provider: &Identity,
        lease_id: &str,
        at_ms: u64,
        reason: &str,
    ) -> Result<u64, ClientError> {
        let validator = self.info().await?.validator;
        // The reason as the validator takes it: at most its limit, cut at a character.
        let mut reason = reason.to_string();
        while reason.len() > crate::settlement::MAX_UNDELIVERED_REASON {
            reason.pop();
        }
        let envelope = provider.seal(
            crate::settlement::UNDELIVERED_KIND,
            &crate::settlement::UndeliveredMessage {
                validator,
                lease_id: lease_id.to_string(),
                at_ms,
                reason,
            },
        )?;
        let answer: serde_json::Value = self.post("/v1/market/undelivered", &envelope).await?;
        answer["undelivered_from_ms"]
            .as_u64()
            .ok_or_else(|| ClientError::BadAnswer(format!("no undelivered_from_ms in {answer}")))
    }

    /// Asks for a withdrawal voucher of `amount_micro_usd` from `owner`'s escrow account
    /// (`POST /v1/market/withdraw`), signed now.
    pub async fn withdraw(
        &self,
        owner: &Identity,
        amount_micro_usd: u64,
    ) -> Result<crate::settlement::Voucher, ClientError> {
        let validator = self.info().await?.validator;
        let envelope = owner.seal(
            crate::settlement::WITHDRAW_KIND,
            &crate::settlement::WithdrawMessage {
                validator,
                amount_micro_usd,
                at_ms: now_ms(),
            },
        )?;
        self.post("/v1/market/withdraw", &envelope).await
    }
}

/// Text as one URL path segment or query value: unreserved characters as they are, every
/// other byte percent-encoded.
pub fn path_segment(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::path_segment;

    #[test]
    fn text_becomes_one_path_segment() {
        assert_eq!(path_segment("GPU-0bb9b03c-74f3"), "GPU-0bb9b03c-74f3");
        assert_eq!(path_segment("a/b?c d&é"), "a%2Fb%3Fc%20d%26%C3%A9");
    }
}
